//! Process-group policy: how a command's whole tree is signalled, waited for and reaped. Shared by exec-server's
//! engine and sidecar-ipc's supervisor, so the policy exists once.
//!
//! Every command leads its own process group (pgid = leader pid). tokio owns the leader and reaps it; the rest of
//! the group is reaped here with `waitpid(-pgid)`, which is only called once the leader is gone, so it can never
//! steal the leader's status from tokio. `waitpid(-1)` is never used.

use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::time::{sleep, timeout_at, Instant};

/// How often a group whose leader is gone is checked for leftover members. There is no readiness signal for "a
/// process that is not my child exited", so this is a short poll, used only while such members exist.
const POLL: Duration = Duration::from_millis(10);
/// How long SIGKILLed members may take to disappear before we stop waiting (they may be uninterruptible, or
/// belong to another user and refuse signals).
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Sends `signal` to every process of the group. A group that is already gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    // pgid 0 would mean our own group; never signal that, whatever went wrong upstream.
    if pgid <= 1 {
        return;
    }
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Whether no process of the group is left, zombies included (so reap first).
pub fn group_is_empty(pgid: i32) -> bool {
    matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// Reaps every member of the group that has exited and is our child (members re-parented to us as subreaper).
/// Must only be called after tokio has reaped the leader.
pub fn reap_members(pgid: i32) {
    while let Ok(status) = waitpid(Pid::from_raw(-pgid), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Timeout or cancellation: SIGTERM to the whole group, up to `grace` for it to go, then SIGKILL to the whole group.
/// Returns the leader's status once the leader and every other member are gone (or, see [`finish_group`], given
/// up on).
pub async fn terminate_group(child: &mut Child, pgid: i32, grace: Duration) -> std::io::Result<ExitStatus> {
    let deadline = Instant::now() + grace;
    signal_group(pgid, Signal::SIGTERM);
    // A stopped process only sees SIGTERM once it runs again.
    signal_group(pgid, Signal::SIGCONT);
    let status = match timeout_at(deadline, child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            child.wait().await?
        }
    };
    finish_group(pgid, deadline).await;
    Ok(status)
}

/// The leader is gone: waits until `deadline` for the rest of the group to leave, then SIGKILLs what is left and
/// waits for it to disappear. False when members were still there [`KILL_WAIT`] after SIGKILL (uninterruptible,
/// or another user's and deaf to our signals); the caller says so in its own log.
pub async fn finish_group(pgid: i32, deadline: Instant) -> bool {
    let mut killed_at = None;
    loop {
        reap_members(pgid);
        if group_is_empty(pgid) {
            return true;
        }
        match killed_at {
            None if Instant::now() >= deadline => {
                signal_group(pgid, Signal::SIGKILL);
                killed_at = Some(Instant::now());
            }
            Some(at) if at.elapsed() > KILL_WAIT => return false,
            _ => {}
        }
        sleep(POLL).await;
    }
}

/// Leftovers after the leader exited by itself: SIGTERM, `grace`, SIGKILL, as for a timeout. False as for
/// [`finish_group`].
pub async fn terminate_leftovers(pgid: i32, grace: Duration) -> bool {
    reap_members(pgid);
    if group_is_empty(pgid) {
        return true;
    }
    signal_group(pgid, Signal::SIGTERM);
    signal_group(pgid, Signal::SIGCONT);
    finish_group(pgid, Instant::now() + grace).await
}

/// The exit code as a shell reports it: the code, or 128+N for signal N (and N itself).
pub fn exit_code_of(status: ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (code, None),
        (None, Some(signal)) => (128 + signal, Some(signal)),
        (None, None) => (-1, None),
    }
}

/// Makes this process the reaper of every orphaned descendant, so grandchildren whose parent died are re-parented
/// here (and reaped with their group) instead of to PID 1, which in a container may not reap at all.
pub fn become_subreaper() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code_of(ExitStatus::from_raw(3 << 8)), (3, None));
        assert_eq!(exit_code_of(ExitStatus::from_raw(9)), (137, Some(9)));
    }
}
