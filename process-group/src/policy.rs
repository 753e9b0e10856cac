//! The termination policy, once for every kind of target: SIGTERM (with SIGCONT, so a stopped process sees it),
//! up to a grace period to leave, then SIGKILL, repeated until nothing is left or we give up.

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{sleep, timeout_at, Instant};

use crate::{Leader, Pgid};

/// How often members are checked again while some are left. There is no readiness signal for "a process that is
/// not my child exited", so this is a short poll, used only while such members exist.
const POLL: Duration = Duration::from_millis(10);
/// How long SIGKILLed members may take to disappear before we stop waiting (they may be uninterruptible, or
/// belong to another user and refuse signals).
pub const KILL_WAIT: Duration = Duration::from_secs(2);

/// What the policy ends: a process group ([`Pgid`]), or the processes carrying a tag ([`crate::Tagged`]).
pub trait Members {
    /// Sends `signal` to every member.
    fn signal(&mut self, signal: Signal);
    /// Reaps the members that exited and are our children (never a leader tokio owns).
    fn reap(&mut self);
    /// Whether no member is left; call [`Members::reap`] first, since an unreaped zombie may count.
    fn is_empty(&mut self) -> bool;
}

impl Members for Pgid {
    fn signal(&mut self, signal: Signal) {
        Pgid::signal(*self, signal);
    }

    /// Group members only: the policy is applied to a group once its leader is reaped (see [`term_then_kill_group`]).
    fn reap(&mut self) {
        self.reap_members();
    }

    fn is_empty(&mut self) -> bool {
        Pgid::is_empty(*self)
    }
}

/// SIGTERM, and SIGCONT: a stopped process only sees a signal once it runs again.
pub fn ask_to_stop(members: &mut impl Members) {
    members.signal(Signal::SIGTERM);
    members.signal(Signal::SIGCONT);
}

/// Waits until `kill_at` for the members to leave, then SIGKILLs whatever is left — again on every look, for what
/// was forked meanwhile — for up to `give_up` more. False when members were still there then (uninterruptible, or
/// another user's and deaf to our signals); the caller says so in its own log.
pub async fn wait_then_kill(members: &mut impl Members, kill_at: Instant, give_up: Duration) -> bool {
    let mut killed_at = None;
    loop {
        members.reap();
        if members.is_empty() {
            return true;
        }
        let now = Instant::now();
        if now >= kill_at {
            let first = *killed_at.get_or_insert(now);
            if now.duration_since(first) > give_up {
                return false;
            }
            members.signal(Signal::SIGKILL);
        }
        sleep(POLL).await;
    }
}

/// Members without a leader to wait for (leftovers of a group whose leader exited by itself, escapees): SIGTERM,
/// up to `grace`, SIGKILL. False as for [`wait_then_kill`].
pub async fn term_then_kill(members: &mut impl Members, grace: Duration) -> bool {
    members.reap();
    if members.is_empty() {
        return true;
    }
    ask_to_stop(members);
    wait_then_kill(members, Instant::now() + grace, KILL_WAIT).await
}

/// Timeout or cancellation of a running command: SIGTERM to its whole group, up to `grace` for it to go, then
/// SIGKILL to the whole group. Returns the leader's status once the leader and every other member are gone (or,
/// see [`wait_then_kill`], given up on).
pub async fn term_then_kill_group(leader: &mut Leader, grace: Duration) -> std::io::Result<ExitStatus> {
    signal_then_kill_group(leader, Signal::SIGTERM, grace).await
}

/// As [`term_then_kill_group`], with `signal` in place of SIGTERM: a supervisor passes on the signal it received
/// (SIGINT, SIGHUP), and the group has the same grace period before SIGKILL.
pub async fn signal_then_kill_group(
    leader: &mut Leader,
    signal: Signal,
    grace: Duration,
) -> std::io::Result<ExitStatus> {
    let deadline = Instant::now() + grace;
    let mut group = leader.pgid();
    group.signal(signal);
    group.signal(Signal::SIGCONT);
    let status = match timeout_at(deadline, leader.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            group.signal(Signal::SIGKILL);
            leader.wait().await?
        }
    };
    wait_then_kill(&mut group, deadline, KILL_WAIT).await;
    Ok(status)
}
