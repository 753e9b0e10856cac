//! Build daemons a command leaves behind (docs/exec-server.md, "Daemons"): which of its escaped descendants are kept,
//! the list of kept sessions with its bounds (`--max-daemons`, `--daemon-idle`), and how they end.
//!
//! *Decision* (measured in BENCHMARKS.md, "Build daemons"): a second Gradle build forwarded took 5.5× and 4.3× a
//! native one, Bazel 15.0×, because the sweep ended the daemon each build starts; with the daemon alive both were at parity. So a
//! session a command left behind is kept when it looks like a daemon, and everything else is swept as before. The
//! rule, checked when the command's group is gone:
//! 1. the command ended by itself (not a timeout, idle timeout, cancel, reattach window or shutdown), and neither the
//!    server (`--daemons end`) nor the request (`"daemons": "end"`) asked to end its daemons;
//! 2. the process carries the job's tag and is in a session of its own making: neither the server's session nor the
//!    command's;
//! 3. no process of that session holds one of the command's pipes or its terminal, nor has a controlling terminal
//!    (one that still writes to the command's output is a background job, not a daemon);
//! 4. a process of the session listens on a socket (TCP or UNIX): a daemon is found again by its clients.
//!
//! A kept session is remembered by its job's tag and its session id; later sweeps leave its members alone (also the
//! ones a later command's tag marks, when a daemon passes its client's environment on), and the shutdown ends them
//! with the running commands (by session and by tag, so that what a daemon forked later is found too).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use process_group::procfs;

use crate::metrics::{CommandMetrics, DaemonEnd};

/// What the server does with the daemons its commands start.
#[derive(Debug, Clone)]
pub struct DaemonPolicy {
    /// Keep those that pass the rule (`--daemons keep`), or end them all as any escapee (`--daemons end`).
    pub keep: bool,
    /// Kept sessions at most: keeping one more ends the oldest.
    pub max: usize,
    /// Kept sessions are ended once no command has run for this long; `None`: never.
    pub idle: Option<Duration>,
}

/// What the rule needs to know of a command that finished.
#[derive(Debug, Clone)]
pub struct Finished {
    pub job: u64,
    /// Rule 1: it ended by itself and its daemons may be kept.
    pub may_keep: bool,
    /// Rule 3: what its descriptors were (`pipe:[INODE]` of its pipes, the path of its terminal), which no
    /// process of a kept session may hold.
    pub descriptors: Vec<String>,
    /// Rule 2: its own session, when it is not the server's (a terminal run leads one).
    pub session: Option<i32>,
}

/// A session kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSession {
    /// The job whose tag its members carry.
    pub job: u64,
    pub session: i32,
    /// Its members when it was kept.
    pub pids: Vec<i32>,
    /// Listening sockets its members held then.
    pub listens: usize,
    pub since: Instant,
}

/// The kept sessions and the policy that bounds them.
#[derive(Debug)]
pub struct Daemons {
    policy: DaemonPolicy,
    /// The server's own session (no daemon is in it).
    server_session: i32,
    kept: Mutex<Vec<KeptSession>>,
    /// After the shutdown began nothing more is kept.
    closed: std::sync::atomic::AtomicBool,
    /// Commands running now, and when the last one ended (for `--daemon-idle`).
    running: AtomicUsize,
    last_active: Mutex<Instant>,
    metrics: CommandMetrics,
}

impl Daemons {
    pub fn new(policy: DaemonPolicy, metrics: CommandMetrics) -> Self {
        let server_session = nix::unistd::getsid(None).map_or(-1, |sid| sid.as_raw());
        Daemons {
            policy,
            server_session,
            kept: Mutex::default(),
            closed: false.into(),
            running: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            metrics,
        }
    }

    pub fn policy(&self) -> &DaemonPolicy {
        &self.policy
    }

    /// A command started (the idle clock stops).
    pub fn command_started(&self) {
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    /// A command ended (the idle clock starts when none runs).
    pub fn command_ended(&self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
        *self.last_active.lock().unwrap() = Instant::now();
    }

    /// When the kept sessions are due to be ended for idleness, if they are (none kept, none running: never).
    pub fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.policy.idle?;
        if self.running.load(Ordering::Relaxed) > 0 || self.kept.lock().unwrap().is_empty() {
            return None;
        }
        self.last_active.lock().unwrap().checked_add(idle)
    }

    /// The sessions among the processes `tagged` (carrying `finished`'s tag, outside its group) that pass the rule.
    pub fn recognise(&self, finished: &Finished, tagged: &[i32]) -> Vec<KeptSession> {
        if !self.policy.keep || !finished.may_keep || self.closed.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut sessions: HashMap<i32, Vec<i32>> = HashMap::new();
        for pid in tagged {
            if let Some(stat) = procfs::stat(*pid) {
                sessions.entry(stat.session).or_default().push(*pid);
            }
        }
        let now = Instant::now();
        sessions
            .into_iter()
            .filter(|(session, _)| *session != self.server_session && Some(*session) != finished.session)
            .filter_map(|(session, pids)| {
                // Every process of the session, tagged or not: what the daemon runs is the session.
                let members: Vec<i32> = procfs::pids()
                    .into_iter()
                    .filter(|pid| procfs::stat(*pid).is_some_and(|s| s.session == session))
                    .collect();
                let holds_the_commands = members.iter().any(|pid| {
                    procfs::stat(*pid).is_some_and(|stat| stat.tty != 0)
                        || procfs::descriptors(*pid).iter().any(|target| finished.descriptors.contains(target))
                });
                if holds_the_commands {
                    return None;
                }
                let listening = members.first().map(|pid| procfs::listening_sockets(*pid)).unwrap_or_default();
                let listens = members
                    .iter()
                    .flat_map(|pid| procfs::socket_inodes(*pid))
                    .filter(|inode| listening.contains(inode))
                    .count();
                (listens > 0).then_some(KeptSession { job: finished.job, session, pids, listens, since: now })
            })
            .collect()
    }

    /// Keeps `sessions`; returns the oldest ones they push out beyond `--max-daemons` (to be ended), or, once the
    /// shutdown began, `sessions` themselves.
    pub fn keep(&self, sessions: Vec<KeptSession>) -> Vec<KeptSession> {
        if self.closed.load(Ordering::Relaxed) {
            return sessions;
        }
        let mut kept = self.kept.lock().unwrap();
        for session in sessions {
            tracing::info!(
                job = session.job,
                pid = session.pids.first().copied().unwrap_or_default(),
                sid = session.session,
                listens = session.listens,
                "keeping a daemon the command started"
            );
            kept.push(session);
        }
        let over = kept.len().saturating_sub(self.policy.max);
        let evicted: Vec<KeptSession> = kept.drain(..over).collect();
        self.metrics.daemons_kept(kept.len());
        evicted
    }

    /// Sessions kept now.
    pub fn sessions(&self) -> Vec<i32> {
        self.kept.lock().unwrap().iter().map(|kept| kept.session).collect()
    }

    pub fn len(&self) -> usize {
        self.kept.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the sessions that have no member left (their daemons ended by themselves).
    pub fn prune(&self) {
        let mut kept = self.kept.lock().unwrap();
        if kept.is_empty() {
            return;
        }
        let alive: std::collections::HashSet<i32> = procfs::pids()
            .into_iter()
            .filter_map(procfs::stat)
            .filter(|stat| !stat.is_zombie())
            .map(|stat| stat.session)
            .collect();
        kept.retain(|session| alive.contains(&session.session));
        self.metrics.daemons_kept(kept.len());
    }

    /// Takes every kept session (to be ended); with `close`, nothing more is kept from now on (the shutdown).
    pub fn take_all(&self, close: bool) -> Vec<KeptSession> {
        if close {
            self.closed.store(true, Ordering::Relaxed);
        }
        let taken = std::mem::take(&mut *self.kept.lock().unwrap());
        self.metrics.daemons_kept(0);
        taken
    }

    /// Says why `sessions` are being ended (a log line each, and the count).
    pub fn ending(&self, sessions: &[KeptSession], why: DaemonEnd) {
        for session in sessions {
            tracing::info!(job = session.job, sid = session.session, reason = why.label(), "ending a kept daemon");
        }
        self.metrics.daemons_ended(why, sessions.len());
    }
}
