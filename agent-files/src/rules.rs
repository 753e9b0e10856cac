//! The reading rules that may differ between programs reading the IPC folders, as explicit parameters: each program
//! sets them once, in one constant, with its reason for each value. Everything else about reading the folders is
//! the same for all of them and has no parameter (which files are read, [`crate::QUIET_PERIOD`], what is final).

use std::time::Duration;

/// What one program reads its folders with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderRules {
    /// The most of one file that is read ([`crate::read_regular_file`]); a larger file is refused unread. It is
    /// the largest honest file the program's protocol can hold, since it also bounds what a hostile file costs in
    /// memory.
    pub limit: u64,
    /// How often the folders are looked at again whatever inotify reports ([`crate::FolderChanges`]).
    pub recheck: Recheck,
}

/// How often a program looks at its folders again, besides inotify's wake-ups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recheck {
    /// With inotify: only for events a file system does not report (some network and FUSE volumes, a writer on
    /// another machine) and for files a queue overflow lost. It bounds the latency there, against the cost of one
    /// look at everything.
    pub with_inotify: Duration,
    /// Without inotify (it could not be set up: the node's inotify instances used up, a kernel without it; or it
    /// failed): the only way changes are seen, so it bounds every answer's latency.
    pub without_inotify: Duration,
}
