//! The orchestrator's process group: signalling it, reaping it, and ending what is left of it.
//!
//! The orchestrator leads its own group (pgid = its pid), so one `killpg` reaches every process it started that
//! stayed in the group. tokio owns and reaps the leader; the other members, re-parented to us as child subreaper
//! once the leader is gone, are reaped here with `waitpid(-pgid)`, never `waitpid(-1)`.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::time::{sleep, Instant};

/// There is no readiness signal for "a process that is not my child exited", so leftovers are polled, briefly.
const POLL: Duration = Duration::from_millis(10);
/// How long SIGKILLed members may take to disappear before we stop waiting for them.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Sends `signal` to the whole group; a group that is gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    // 0 or 1 would reach our own group or every process: never, whatever went wrong upstream.
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

/// Whether no process of the group is left, zombies included (so reap first).
fn group_is_empty(pgid: i32) -> bool {
    matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Reaps the members that exited and are our children. Only once tokio has reaped the leader.
fn reap_members(pgid: i32) {
    while let Ok(status) = waitpid(Pid::from_raw(-pgid), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Makes orphaned descendants ours, so they are reaped here rather than by a PID 1 that may never reap them.
pub fn become_subreaper() {
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("sidecar-ipc: cannot become child subreaper ({err}); leftover processes are reaped by PID 1");
    }
}

/// The leader is gone: SIGTERM to what is left of its group, `grace`, then SIGKILL; returns once the group is empty
/// (or its members ignore even SIGKILL for [`KILL_WAIT`]).
pub async fn end_leftovers(pgid: i32, grace: Duration) {
    reap_members(pgid);
    if group_is_empty(pgid) {
        return;
    }
    signal_group(pgid, Signal::SIGTERM);
    // A stopped process only sees SIGTERM once it runs again.
    signal_group(pgid, Signal::SIGCONT);
    let deadline = Instant::now() + grace;
    let mut killed_at = None;
    loop {
        reap_members(pgid);
        if group_is_empty(pgid) {
            return;
        }
        match killed_at {
            None if Instant::now() >= deadline => {
                signal_group(pgid, Signal::SIGKILL);
                killed_at = Some(Instant::now());
            }
            Some(at) if Instant::now().duration_since(at) > KILL_WAIT => {
                eprintln!("sidecar-ipc: process group {pgid} still has members after SIGKILL; not waiting for them");
                return;
            }
            _ => {}
        }
        sleep(POLL).await;
    }
}
