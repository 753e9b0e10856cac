//! Waiting for the IPC folders to change: inotify's wake-ups ([`crate::watch`]) with a periodic re-check, and the
//! re-check alone where inotify cannot be had.
//!
//! *Decision:* inotify is never required. Where it cannot be set up (the node's inotify instances are used up:
//! Linux allows 128 per user by default, shared by every container of a node that runs as that user; or a kernel
//! without it) or fails later, the caller is told once
//! ([`Wake::InotifyUnavailable`]) and the folders are looked at every [`Recheck::without_inotify`] instead: a
//! program that answers late is better than one that does not start, since its peer then waits for every answer
//! until its own timeout. (exec-server used to refuse to start; sidecar-ipc fell back to polling.)
//!
//! Callers watch first, then look at the files, then wait, then look again: an event only means "look again", so a
//! lost or merged event costs nothing, and a file written between the watch and the first look still ends the next
//! wait at once.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use crate::rules::Recheck;
use crate::watch::{AddWatchFlags, FolderWatch, WatchDescriptor, CONTENT_CHANGES};

/// Why a wait ended.
#[derive(Debug)]
pub enum Wake {
    /// inotify reported these changes (look at the files they name).
    Changed(Vec<Change>),
    /// Look at everything again: the periodic re-check is due.
    Recheck,
    /// Look at everything again: inotify's queue overflowed, and events were lost.
    Overflowed,
    /// inotify could not be set up, or failed: from now on the folders are re-checked every
    /// [`Recheck::without_inotify`]. Say so once, and look at everything.
    InotifyUnavailable(io::Error),
    /// The caller's deadline came.
    Deadline,
}

/// A file of a watched folder that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The folder's place in the list given to [`FolderChanges::watch`] (one change per place when a folder is
    /// given twice).
    pub folder: usize,
    pub name: OsString,
    /// Removed, or moved away, rather than created or written.
    pub removed: bool,
}

/// Changes in a few folders, as wake-ups.
#[derive(Debug)]
pub struct FolderChanges {
    /// The watch and the descriptor of each folder, in the order given; `None` without inotify.
    inotify: Option<(FolderWatch, Vec<WatchDescriptor>)>,
    /// Why there is no inotify, until the caller has been told.
    untold: Option<io::Error>,
    recheck: Recheck,
    next_recheck: Instant,
}

impl FolderChanges {
    /// Watches `folders` (which must exist) for files created, moved in, written, closed after writing, removed or
    /// moved away.
    /// Call within a tokio runtime that has IO and time enabled.
    pub fn watch(folders: &[PathBuf], recheck: Recheck) -> Self {
        let watch = || -> io::Result<(FolderWatch, Vec<WatchDescriptor>)> {
            let watch = FolderWatch::new().map_err(|err| {
                // What inotify_init answers when the user's instances (fs.inotify.max_user_instances) are used up.
                let hint = if err.raw_os_error() == Some(nix::libc::EMFILE) {
                    ": the user's inotify instances (sysctl fs.inotify.max_user_instances) may be used up"
                } else {
                    ""
                };
                io::Error::new(err.kind(), format!("cannot set up inotify ({err}){hint}"))
            })?;
            let descriptors = folders
                .iter()
                .map(|folder| {
                    watch.add(folder, CONTENT_CHANGES).map_err(|err| {
                        io::Error::new(err.kind(), format!("cannot watch {} with inotify: {err}", folder.display()))
                    })
                })
                .collect::<io::Result<_>>()?;
            Ok((watch, descriptors))
        };
        let (inotify, untold) = match watch() {
            Ok(watch) => (Some(watch), None),
            Err(err) => (None, Some(err)),
        };
        let mut changes = FolderChanges { inotify, untold, recheck, next_recheck: Instant::now() };
        changes.next_recheck = Instant::now() + changes.recheck_interval();
        changes
    }

    /// Whether inotify wakes the waits (otherwise only the re-check does).
    pub fn has_inotify(&self) -> bool {
        self.inotify.is_some()
    }

    /// How often the folders are re-checked now.
    pub fn recheck_interval(&self) -> Duration {
        if self.has_inotify() {
            self.recheck.with_inotify
        } else {
            self.recheck.without_inotify
        }
    }

    /// Waits until something changed in a watched folder, the re-check is due, or `deadline`, whichever is first.
    /// Cancel-safe: changes not returned stay queued.
    pub async fn next(&mut self, deadline: Option<Instant>) -> Wake {
        if let Some(err) = self.untold.take() {
            return Wake::InotifyUnavailable(err);
        }
        let until = deadline.map_or(self.next_recheck, |deadline| deadline.min(self.next_recheck));
        let batch = match &self.inotify {
            Some((watch, _)) => tokio::select! {
                batch = watch.next_batch() => Some(batch),
                () = sleep_until(until.into()) => None,
            },
            None => {
                sleep_until(until.into()).await;
                None
            }
        };
        match batch {
            None if Instant::now() >= self.next_recheck => {
                self.next_recheck = Instant::now() + self.recheck_interval();
                Wake::Recheck
            }
            None => Wake::Deadline,
            Some(Err(err)) => {
                self.inotify = None;
                self.next_recheck = Instant::now() + self.recheck_interval();
                Wake::InotifyUnavailable(io::Error::new(err.kind(), format!("inotify failed: {err}")))
            }
            Some(Ok(events)) if events.iter().any(|event| event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)) => {
                // The caller looks at everything now: that is this period's re-check.
                self.next_recheck = Instant::now() + self.recheck_interval();
                Wake::Overflowed
            }
            Some(Ok(events)) => {
                let descriptors = self.inotify.as_ref().map(|(_, descriptors)| descriptors.as_slice()).unwrap_or(&[]);
                let removed = AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM;
                let changes = events
                    .into_iter()
                    .filter_map(|event| Some((event.wd, event.name?, event.mask.intersects(removed))))
                    .flat_map(|(wd, name, removed)| {
                        let folders = descriptors.iter().enumerate().filter(move |(_, watched)| **watched == wd);
                        folders.map(move |(folder, _)| Change { folder, name: name.clone(), removed })
                    })
                    .collect();
                Wake::Changed(changes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECHECK: Recheck =
        Recheck { with_inotify: Duration::from_secs(3600), without_inotify: Duration::from_millis(20) };

    /// The next wake-up, with a hang guard.
    async fn next(changes: &mut FolderChanges, deadline: Option<Instant>) -> Wake {
        tokio::time::timeout(Duration::from_secs(20), changes.next(deadline)).await.unwrap()
    }

    #[tokio::test]
    async fn changes_name_their_folder_and_file() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let folders = [one.path().to_path_buf(), two.path().to_path_buf(), one.path().to_path_buf()];
        let mut changes = FolderChanges::watch(&folders, RECHECK);
        assert!(changes.has_inotify());
        std::fs::write(two.path().join("request-1.json"), "{}").unwrap();
        let Wake::Changed(changed) = next(&mut changes, None).await else { panic!("no change") };
        assert_eq!(changed[0], Change { folder: 1, name: "request-1.json".into(), removed: false });
        std::fs::write(one.path().join("done"), "").unwrap();
        std::fs::remove_file(one.path().join("done")).unwrap();
        let mut seen = Vec::new();
        while !seen.iter().any(|change: &Change| change.removed) {
            let Wake::Changed(changed) = next(&mut changes, None).await else { panic!("no change") };
            seen.extend(changed);
        }
        let folders: Vec<usize> = seen.iter().filter(|change| change.removed).map(|change| change.folder).collect();
        assert_eq!(folders, [0, 2], "a folder given twice has its changes at both places");
    }

    #[tokio::test]
    async fn a_deadline_or_the_recheck_ends_a_quiet_wait() {
        let dir = tempfile::tempdir().unwrap();
        let mut changes = FolderChanges::watch(&[dir.path().to_path_buf()], RECHECK);
        let soon = Instant::now() + Duration::from_millis(10);
        assert!(matches!(next(&mut changes, Some(soon)).await, Wake::Deadline));
        changes.next_recheck = Instant::now();
        assert!(matches!(next(&mut changes, None).await, Wake::Recheck));
        assert!(changes.next_recheck > Instant::now() + Duration::from_secs(3000), "the next one is an hour away");
    }

    #[tokio::test]
    async fn without_inotify_the_caller_is_told_once_and_the_recheck_is_the_wake_up() {
        // A folder that does not exist cannot be watched: the same fallback as no inotify at all.
        let dir = tempfile::tempdir().unwrap();
        let mut changes = FolderChanges::watch(&[dir.path().join("missing")], RECHECK);
        assert!(!changes.has_inotify());
        assert_eq!(changes.recheck_interval(), RECHECK.without_inotify);
        let Wake::InotifyUnavailable(err) = next(&mut changes, None).await else { panic!("not told") };
        assert!(err.to_string().contains("missing with inotify"), "{err}");
        for _ in 0..3 {
            assert!(matches!(next(&mut changes, None).await, Wake::Recheck));
        }
    }
}
