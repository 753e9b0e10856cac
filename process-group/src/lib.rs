//! Process-group policy: how a command's whole tree is started, signalled, waited for and reaped. Shared by
//! exec-server's engine and sidecar-ipc's supervisor, so the policy exists once.
//!
//! - Every command leads its own process group ([`spawn_leader`], [`Pgid`]); tokio owns the leader and reaps it. A
//!   command on a terminal leads its own session too ([`spawn_pty_leader`]).
//! - Ending anything — a group on timeout, its leftovers, the descendants that escaped it with `setsid` (found by a
//!   [`Tag`] in their environment) — follows one policy ([`policy`]): SIGTERM, a grace period, SIGKILL.
//! - The rest of a group is reaped with `waitpid(-pgid)`, only once the leader is gone; escapees and other adopted
//!   orphans are reaped by pid ([`reaper`]). `waitpid(-1)` is never used, so a leader's status is never taken from
//!   tokio.
//!
//! And what every binary that starts or is stopped as a process needs alike: the PATH lookup of a program
//! ([`program`]), the stop signals ([`StopSignals`]), durations in seconds on the command line ([`parse_seconds`]),
//! and what is read from `/proc` ([`procfs`]).

mod leader;
mod pgid;
pub mod policy;
pub mod procfs;
pub mod program;
mod pty_leader;
pub mod reaper;
mod seconds;
mod stop_signals;
mod tag;

use std::process::ExitStatus;

pub use leader::{spawn_leader, Leader};
pub use pgid::Pgid;
pub use policy::{ask_to_stop, signal_then_kill_group, term_then_kill, term_then_kill_group, wait_then_kill, Members};
pub use pty_leader::{open_pty, spawn_pty_leader, Pty};
pub use reaper::{reap_adopted, reap_adopted_among, reap_adopted_forever};
pub use seconds::{parse_seconds, SecondsError};
pub use stop_signals::{next_stop_signal, StopSignals};
pub use tag::{Tag, Tagged};

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
/// here (and reaped with their group, or by [`reap_adopted_forever`]) instead of to PID 1, which in a container may
/// not reap at all.
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
