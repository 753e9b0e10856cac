//! File descriptors: the soft open-file limit raised at start to what the connections and commands need, and the
//! share of it that HTTP connections may take, so that accepting connections can never make a command fail to start.
//!
//! Commands inherit the soft limit, so it is raised only as far as needed (the connection cap plus the reserve),
//! never past [`NOFILE_CEILING`] and never lowered: raising it to the hard limit (524288, or 1073741816 under some
//! container runtimes) made tools that close every descriptor up to the limit, or use select(), slow or fail.
//! Resetting the limit in each child instead would need `pre_exec`, which is unsafe code.
//!
//! Every connection costs one descriptor, every running command a few (its stdout, stderr and stdin pipes, a pidfd,
//! more for a moment while it is spawned). Without a cap, idle connections alone used up a low limit and commands
//! failed with "Too many open files". So the server keeps a reserve for the most commands that can run at once
//! (HTTP and file protocol) plus its own files, and connections get at most what is left.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Descriptors a running command may hold at its peak: three pipes of two ends while it is spawned, a pidfd, and
/// slack for the reads of `/proc` that end escaped descendants.
pub const FDS_PER_COMMAND: usize = 8;
/// Descriptors for the server itself: stdio, the listener, the runtime's epoll and wake-ups, inotify, logs, and
/// connections being refused or closed.
pub const BASE_FDS: usize = 64;
/// The cap on open connections when none is given (less when the open-file limit leaves less). A builder serves a
/// handful of agents: this is far beyond what they open, and bounds what idle connections cost (each holds at most
/// 64 KiB of read buffer and 64 KiB of write buffer in the worst case).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The smallest cap: below it the server could not even answer its own health check under load.
const MIN_CONNECTIONS: usize = 8;
/// The highest the server raises its soft open-file limit to, whatever the connections and commands would take.
pub const NOFILE_CEILING: u64 = 65536;

/// Raises the soft open-file limit to `wanted` (see [`ConnectionBudget::nofile_wanted`]), within the hard limit and
/// [`NOFILE_CEILING`], and says from what to what. Commands inherit the raised limit.
pub fn raise_nofile_limit(wanted: u64) -> nix::Result<(u64, u64)> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = wanted.min(NOFILE_CEILING).min(hard);
    if soft < target {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    }
    Ok((soft, target.max(soft)))
}

/// How many connections may be open, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionBudget {
    /// The cap in force.
    pub cap: usize,
    /// The soft open-file limit it was derived from.
    pub nofile: u64,
    /// Descriptors kept for commands and the server itself.
    pub reserve: usize,
    /// The cap asked for (or the default) did not fit in what the limit leaves.
    pub clamped: bool,
}

impl ConnectionBudget {
    /// The cap for `wanted` connections (or the default) with `commands` commands able to run at once, under the
    /// current soft open-file limit.
    pub fn current(wanted: Option<usize>, commands: usize) -> Self {
        let nofile = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
        ConnectionBudget::new(wanted, commands, nofile)
    }

    /// The soft open-file limit under which `wanted` connections (or the default) fit beside the reserve for
    /// `commands` commands.
    pub fn nofile_wanted(wanted: Option<usize>, commands: usize) -> u64 {
        let connections = wanted.unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1);
        u64::try_from(connections.saturating_add(reserve(commands))).unwrap_or(u64::MAX)
    }

    fn new(wanted: Option<usize>, commands: usize, nofile: u64) -> Self {
        let reserve = reserve(commands);
        let room = usize::try_from(nofile).unwrap_or(usize::MAX).saturating_sub(reserve);
        let wanted = wanted.unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1);
        let cap = wanted.min(room.max(MIN_CONNECTIONS));
        ConnectionBudget { cap, nofile, reserve, clamped: cap < wanted }
    }

    /// The limit leaves commands less than their reserve even with the smallest cap.
    pub fn starved(&self) -> bool {
        (self.cap + self.reserve) as u64 > self.nofile
    }
}

/// Descriptors kept for `commands` commands and the server itself.
fn reserve(commands: usize) -> usize {
    commands.saturating_mul(FDS_PER_COMMAND).saturating_add(BASE_FDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_get_what_the_reserve_leaves() {
        // 256 HTTP + 8 file commands: 264 × 8 + 64 = 2176 kept.
        let plenty = ConnectionBudget::new(None, 264, 1 << 20);
        assert_eq!((plenty.cap, plenty.reserve, plenty.clamped), (DEFAULT_MAX_CONNECTIONS, 2176, false));
        let tight = ConnectionBudget::new(None, 264, 2676);
        assert_eq!((tight.cap, tight.clamped, tight.starved()), (500, true, false));
        let asked = ConnectionBudget::new(Some(100), 264, 2676);
        assert_eq!((asked.cap, asked.clamped), (100, false));
        let starved = ConnectionBudget::new(None, 264, 1024);
        assert_eq!((starved.cap, starved.starved()), (MIN_CONNECTIONS, true));
        // What the soft limit is raised to: the cap beside the reserve, so that the default fits.
        assert_eq!(ConnectionBudget::nofile_wanted(None, 264), 1024 + 2176);
        assert_eq!(ConnectionBudget::nofile_wanted(Some(100), 4), 100 + 96);
        let fits = ConnectionBudget::new(None, 264, ConnectionBudget::nofile_wanted(None, 264));
        assert_eq!((fits.cap, fits.clamped), (DEFAULT_MAX_CONNECTIONS, false));
    }
}
