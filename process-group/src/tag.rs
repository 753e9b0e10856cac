//! Processes found by a tag in their environment: the members of a command that left its process group.
//!
//! A process group cannot hold a daemon that calls `setsid`, and without cgroups nothing else ties it to the
//! command that started it. What does survive `setsid` is the environment: a variable set on the command
//! (`NAME=value`) is inherited by all its descendants, and `/proc/<pid>/environ` shows it. A descendant that scrubs
//! its environment (`env -i`, `env -u NAME`) is not found: that is the limit of this approach. So are zombies
//! (their environment is gone), which is why [`Tagged`] keeps the pids it saw, to reap them.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::policy::Members;
use crate::reaper;

/// `NAME=value`, exactly as it appears in an environment block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tag(Vec<u8>);

impl Tag {
    pub fn new(name: &str, value: &str) -> Tag {
        Tag(format!("{name}={value}").into_bytes())
    }

    fn is_in(&self, environ: &[u8]) -> bool {
        environ.split(|&b| b == 0).any(|entry| entry == self.0.as_slice())
    }
}

/// The live processes that carry any of a set of tags, as members for the termination policy: signalled by pid,
/// found again before every signal (an escapee may fork right up to the moment it is killed).
#[derive(Debug)]
pub struct Tagged {
    tags: Vec<Tag>,
    /// Pids seen carrying a tag; kept after they die so that the adopted ones among them are reaped.
    seen: Vec<i32>,
    /// Process groups whose members are left out: someone else is ending those groups by their own policy.
    skip_groups: Vec<i32>,
    /// Sessions whose members are left out: they are kept (exec-server's daemons).
    skip_sessions: Vec<i32>,
    /// Sessions whose members are found too, tagged or not.
    sessions: Vec<i32>,
}

impl Tagged {
    pub fn new(tags: Vec<Tag>) -> Tagged {
        Tagged { tags, seen: Vec::new(), skip_groups: Vec::new(), skip_sessions: Vec::new(), sessions: Vec::new() }
    }

    /// Leaves out the members of the sessions `sessions`: processes someone keeps on purpose.
    pub fn outside_sessions(mut self, sessions: Vec<i32>) -> Tagged {
        self.skip_sessions = sessions;
        self
    }

    /// Also finds every member of the sessions `sessions`, tagged or not: a session kept whole (every process in it
    /// descends from the one that made it) ends whole.
    pub fn with_sessions(mut self, sessions: Vec<i32>) -> Tagged {
        self.sessions = sessions;
        self
    }

    /// Leaves out the members of `groups`: only the processes that left them are found and signalled. A command
    /// whose group is being terminated must not get a second SIGTERM by its tag (many tools read a second
    /// interrupt as "exit now, skip the clean-up").
    pub fn outside_groups(mut self, groups: Vec<i32>) -> Tagged {
        self.skip_groups = groups;
        self
    }

    /// Pids of the live processes (other than us) that carry one of the tags (or are in one of the sessions), less
    /// those left out.
    pub fn find(&self) -> Vec<i32> {
        if self.tags.is_empty() && self.sessions.is_empty() {
            return Vec::new();
        }
        let own = std::process::id() as i32;
        crate::procfs::pids()
            .into_iter()
            .filter(|pid| *pid != own && (self.carried_by(*pid) || self.in_a_session(*pid)) && !self.left_out(*pid))
            .collect()
    }

    /// What [`Tagged::find`] finds by tag, in one pass through `/proc` whatever the number of tags: for each tag (in
    /// order), the pids that carry it, less those left out. Members of [`Tagged::with_sessions`] that carry no tag
    /// are not in it. One pass for many tags is what makes a batch of finished jobs cost one look, not one per job.
    pub fn find_by_tag(&self) -> Vec<Vec<i32>> {
        let mut found = vec![Vec::new(); self.tags.len()];
        if self.tags.is_empty() {
            return found;
        }
        let own = std::process::id() as i32;
        for pid in crate::procfs::pids().into_iter().filter(|pid| *pid != own) {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
            let mut carried = environ
                .split(|&b| b == 0)
                .flat_map(|entry| self.tags.iter().position(|tag| entry == tag.0.as_slice()))
                .peekable();
            if carried.peek().is_some() && !self.left_out(pid) {
                carried.for_each(|index| found[index].push(pid));
            }
        }
        found
    }

    /// Every pid seen carrying a tag so far.
    pub fn seen(&self) -> &[i32] {
        &self.seen
    }

    fn left_out(&self, pid: i32) -> bool {
        (!self.skip_groups.is_empty() || !self.skip_sessions.is_empty())
            && crate::procfs::stat(pid).is_some_and(|stat| {
                self.skip_groups.contains(&stat.group) || self.skip_sessions.contains(&stat.session)
            })
    }

    /// Whether `pid` is alive (not a zombie) in one of the sessions.
    fn in_a_session(&self, pid: i32) -> bool {
        !self.sessions.is_empty()
            && crate::procfs::stat(pid).is_some_and(|stat| !stat.is_zombie() && self.sessions.contains(&stat.session))
    }

    /// Whether `pid` is alive and carries a tag (a zombie's environment reads as empty).
    fn carried_by(&self, pid: i32) -> bool {
        std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| self.tags.iter().any(|t| t.is_in(&environ)))
    }

    fn remember(&mut self, pids: &[i32]) {
        for pid in pids {
            if !self.seen.contains(pid) {
                self.seen.push(*pid);
            }
        }
    }
}

impl Members for Tagged {
    fn signal(&mut self, signal: Signal) {
        let pids = self.find();
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), signal);
        }
        self.remember(&pids);
    }

    fn reap(&mut self) {
        reaper::reap_adopted_among(self.seen.iter().copied());
    }

    /// Cheap while members are known to be alive; a full look through `/proc` only once they all seem gone.
    fn is_empty(&mut self) -> bool {
        if self.seen.iter().any(|pid| self.carried_by(*pid) || self.in_a_session(*pid)) {
            return false;
        }
        let pids = self.find();
        self.remember(&pids);
        pids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncBufReadExt;

    use super::*;
    use crate::reaper::tests::{state, until};

    /// One pass finds each tag's carriers apart, and a process with none of the tags is in no list.
    #[tokio::test]
    async fn each_tag_gets_its_own_carriers() {
        let value = |n: u32| format!("by-tag-{}-{n}", std::process::id());
        let mut sleepers: Vec<std::process::Child> = [1, 2, 3]
            .into_iter()
            .map(|n| std::process::Command::new("sleep").arg("30").env("TEST_TAG", value(n)).spawn().unwrap())
            .collect();
        let pids: Vec<i32> = sleepers.iter().map(|child| child.id() as i32).collect();
        let tagged = Tagged::new(vec![Tag::new("TEST_TAG", &value(2)), Tag::new("TEST_TAG", &value(1))]);
        // A spawned child's environment is its own once it has exec'd: wait for that, not for a while.
        until("the sleepers to carry their tags", || tagged.find().len() == 2).await;
        assert_eq!(tagged.find_by_tag(), vec![vec![pids[1]], vec![pids[0]]]);
        for sleeper in &mut sleepers {
            sleeper.kill().unwrap();
            sleeper.wait().unwrap();
        }
        assert_eq!(tagged.find_by_tag(), vec![Vec::<i32>::new(), Vec::new()]);
    }

    /// A TERM-ignoring daemon that left its group with `setsid` is found by its tag and ended by the policy, and
    /// reaped once it is our orphan.
    #[tokio::test]
    async fn a_term_ignoring_escapee_is_ended_by_its_tag() {
        crate::become_subreaper().unwrap();
        let value = format!("tag-test-{}", std::process::id());
        let mut command = tokio::process::Command::new("sh");
        command
            .args(["-c", "setsid sh -c 'trap \"\" TERM; echo $$; exec sleep 30 </dev/null >/dev/null' & wait"])
            .env("TEST_TAG", &value)
            .stdout(std::process::Stdio::piped());
        let mut leader = crate::spawn_leader(&mut command).unwrap();
        let mut line = String::new();
        tokio::io::BufReader::new(leader.child().stdout.take().unwrap()).read_line(&mut line).await.unwrap();
        let escapee: i32 = line.trim().parse().unwrap();
        let mut escaped = Tagged::new(vec![Tag::new("TEST_TAG", &value)]);
        until("the escapee to carry its tag", || escaped.find().contains(&escapee)).await;
        leader.child().start_kill().unwrap();
        leader.wait().await.unwrap();

        assert!(crate::term_then_kill(&mut escaped, Duration::from_millis(200)).await);
        assert_eq!(escaped.find(), Vec::<i32>::new());
        until("the escapee to be reaped", || state(escapee).is_none()).await;
    }
}
