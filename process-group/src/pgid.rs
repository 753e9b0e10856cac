//! Process group ids that can be signalled and waited on without hitting anything else.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The id of a process group that one of our commands leads. Never 0 or 1: `killpg(0)` signals our own group,
/// `waitpid(-0)` waits for our own group's children, and group 1 is init's. A pid that could not be read (a
/// `unwrap_or_default()` upstream) must never turn into one of those, so a `Pgid` can only be made from a value
/// above 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pgid(i32);

impl Pgid {
    /// `None` for 0, 1 and negative values.
    pub fn new(raw: i32) -> Option<Pgid> {
        (raw > 1).then_some(Pgid(raw))
    }

    /// The group a process leads when it was started with `process_group(0)`: its own pid.
    pub fn led_by(pid: u32) -> Option<Pgid> {
        i32::try_from(pid).ok().and_then(Pgid::new)
    }

    pub fn get(self) -> i32 {
        self.0
    }

    /// Sends `signal` to every process of the group. A group that is already gone is not an error.
    pub fn signal(self, signal: Signal) {
        let _ = killpg(Pid::from_raw(self.0), signal);
    }

    /// Whether no process of the group is left, zombies included (so reap first).
    pub fn is_empty(self) -> bool {
        matches!(killpg(Pid::from_raw(self.0), None), Err(Errno::ESRCH))
    }

    /// Reaps every member of the group that has exited and is our child (members re-parented to us as subreaper).
    /// Only once tokio has reaped the leader: `waitpid(-pgid)` would otherwise take the leader's status from it.
    pub fn reap_members(self) {
        while let Ok(status) = waitpid(Pid::from_raw(-self.0), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
    }
}

impl std::fmt::Display for Pgid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_group_and_init_are_not_pgids() {
        assert_eq!(Pgid::new(0), None);
        assert_eq!(Pgid::new(1), None);
        assert_eq!(Pgid::new(-5), None);
        assert_eq!(Pgid::led_by(0), None);
        assert_eq!(Pgid::led_by(u32::MAX), None);
        assert_eq!(Pgid::led_by(42).map(Pgid::get), Some(42));
    }
}
