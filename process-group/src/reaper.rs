//! Reaping the orphans a child subreaper adopts, without ever taking a command leader's exit status from tokio.
//!
//! A child subreaper inherits every descendant whose parent dies: a daemon that escaped with `setsid`, a background
//! job of a shell that exited. When such an adopted child exits, nobody waits for it and it stays a zombie for as
//! long as we live, unless we reap it. The danger is the other kind of child: a command's leader, which tokio owns
//! and reaps itself — its `wait()` is how we learn the exit status. Reaping a leader first would turn that into an
//! error (`ECHILD`). The argument that this never happens:
//!
//! 1. `waitpid(-1)` is never called: every reap here names one pid (and [`Pgid::reap_members`] names a group whose
//!    leader is already reaped).
//! 2. A leader is recorded as *owned* in the same critical section as its spawn ([`spawn_leader`] holds the spawn
//!    lock for reading), and the reaper decides and reaps while holding that lock for writing. While it holds it, no
//!    spawn is half done: every child of ours is either recorded or was never a leader, so a just-spawned leader
//!    cannot be mistaken for an orphan. (The list of children may be older than the lock; a listed pid that is no
//!    longer our child fails with `ECHILD`, and one re-used by a newer leader is recorded by then.)
//! 3. A leader stays owned until its [`Leader`] is dropped, which is after tokio reaped it (or after tokio stopped
//!    caring: a dropped, unreaped child goes to tokio's orphan queue, which treats `ECHILD` as done). Each record is
//!    removed only by the `Leader` that made it (a generation number), so a pid that a newer leader re-uses stays
//!    owned by the newer one.
//! 4. Only zombies are reaped: `waitpid(pid, WNOHANG)` leaves a live child alone.
//!
//! The full reaper ([`reap_adopted_forever`]) is for processes that spawn *every* child through [`spawn_leader`]
//! (the exec-server and sidecar-ipc binaries). In any other process — a test binary that also runs tokio children of
//! its own — it would reap those from under tokio, so it is started explicitly, never by a library.
//! [`reap_adopted_among`], which reaps only pids that the caller found (escapees, by their tag), is safe anywhere.
//!
//! [`Pgid::reap_members`]: crate::Pgid::reap_members
//! [`spawn_leader`]: crate::spawn_leader
//! [`Leader`]: crate::Leader

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError, RwLock};
use std::time::Duration;

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio::process::Child;

/// Held for reading by every spawn, for writing by every reap: a spawn and its record are one step for the reaper.
static SPAWN: RwLock<()> = RwLock::new(());
/// Leaders tokio owns: pid → the generation of the record.
static OWNED: LazyLock<Mutex<HashMap<u32, u64>>> = LazyLock::new(Mutex::default);
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// How often the reaper looks for adopted zombies.
///
/// *Decision:* a timer, not SIGCHLD. Nearly every SIGCHLD is a command's leader exiting, which tokio reaps through
/// its pidfd; listening for SIGCHLD as well cost every command a signal delivered to some thread of ours, a wake-up
/// of the I/O driver and a look through `/proc`, all while its reply was being made (measured: see BENCHMARKS.md,
/// P1). An adopted zombie holds only a process-table slot, and waits at most this long to be reaped.
const SWEEP: Duration = Duration::from_millis(200);

/// A leader's record as owned by tokio; removed when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    pid: u32,
    generation: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut owned = OWNED.lock().unwrap_or_else(PoisonError::into_inner);
        if owned.get(&self.pid) == Some(&self.generation) {
            owned.remove(&self.pid);
        }
    }
}

/// Runs `spawn` and records the child as owned, as one step for the reaper.
pub(crate) fn register(spawn: impl FnOnce() -> std::io::Result<Child>) -> std::io::Result<(Child, Registration)> {
    let _spawning = SPAWN.read().unwrap_or_else(PoisonError::into_inner);
    let child = spawn()?;
    let pid = child.id().ok_or_else(|| std::io::Error::other("a child spawned a moment ago has no pid"))?;
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    OWNED.lock().unwrap_or_else(PoisonError::into_inner).insert(pid, generation);
    Ok((child, Registration { pid, generation }))
}

/// Runs `open` while no spawn can fork (the spawn lock held for writing): for opening descriptors that a library
/// makes close-on-exec only a moment after (see `pty_leader`).
pub(crate) fn without_spawns<T>(open: impl FnOnce() -> T) -> T {
    let _no_spawn = SPAWN.write().unwrap_or_else(PoisonError::into_inner);
    open()
}

/// Reaps those of `pids` that are our adopted children and have exited; leaders tokio owns are left alone. Returns
/// how many were reaped.
pub fn reap_adopted_among(pids: impl IntoIterator<Item = i32>) -> usize {
    let _reaping = SPAWN.write().unwrap_or_else(PoisonError::into_inner);
    let owned = OWNED.lock().unwrap_or_else(PoisonError::into_inner);
    pids.into_iter()
        .filter(|pid| u32::try_from(*pid).is_ok_and(|pid| !owned.contains_key(&pid)))
        .filter(|pid| matches!(waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG)), Ok(status) if status.pid().is_some()))
        .count()
}

/// Reaps every adopted child of this process that has exited. Only for processes that spawn every child through
/// [`spawn_leader`](crate::spawn_leader); see the module's documentation.
pub fn reap_adopted() -> usize {
    reap_adopted_among(children())
}

/// Reaps adopted children for as long as the runtime runs, every [`SWEEP`]. Only for processes that spawn every
/// child through [`spawn_leader`](crate::spawn_leader).
pub async fn reap_adopted_forever() {
    let mut sweep = tokio::time::interval(SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        sweep.tick().await;
        reap_adopted();
    }
}

/// Our children's pids: from `/proc/self/task/*/children` (children are listed per thread, and an orphan is
/// re-parented to one of our threads), or, where the kernel lacks that file, from every process's parent pid.
fn children() -> Vec<i32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return pids };
    for task in tasks.filter_map(Result::ok) {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(list) => pids.extend(list.split_whitespace().filter_map(|pid| pid.parse::<i32>().ok())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                return children_by_parent_pid()
            }
            Err(_) => {} // the thread ended meanwhile; its children moved to another thread
        }
    }
    pids
}

fn children_by_parent_pid() -> Vec<i32> {
    let own = std::process::id() as i32;
    crate::procfs::pids().into_iter().filter(|pid| crate::procfs::stat(*pid).is_some_and(|s| s.parent == own)).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::AsyncBufReadExt;

    use super::*;

    /// The state letter and parent pid of `pid`, or `None` once it is fully gone.
    pub fn state(pid: i32) -> Option<(char, u32)> {
        crate::procfs::stat(pid).map(|stat| (stat.state, stat.parent as u32))
    }

    pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The leader and an adopted orphan are both zombies: the reaper takes the orphan and leaves the leader to tokio.
    #[tokio::test]
    async fn an_adopted_orphan_is_reaped_and_a_leader_is_left_to_tokio() {
        crate::become_subreaper().unwrap();
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", "sleep 0.1 & echo $!; exit 3"]).stdout(std::process::Stdio::piped());
        let mut leader = crate::spawn_leader(&mut command).unwrap();
        let mut line = String::new();
        tokio::io::BufReader::new(leader.child().stdout.take().unwrap()).read_line(&mut line).await.unwrap();
        let orphan: i32 = line.trim().parse().unwrap();
        let (leader_pid, us) = (leader.pgid().get(), std::process::id());
        until("the orphan to be our zombie", || state(orphan) == Some(('Z', us))).await;
        until("the leader to be a zombie", || state(leader_pid).is_some_and(|(s, _)| s == 'Z')).await;

        assert!(reap_adopted() >= 1);
        assert_eq!(state(orphan), None, "the orphan is reaped");
        assert_eq!(state(leader_pid).map(|(s, _)| s), Some('Z'), "the leader is left alone");
        assert_eq!(leader.wait().await.unwrap().code(), Some(3), "tokio still gets the leader's status");
    }
}
