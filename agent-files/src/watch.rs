//! Watching the folders: inotify events, read from async code.
//!
//! The one bridge from the kernel's inotify queue to tokio, shared by exec-server's file transport and sidecar-ipc:
//! the inotify descriptor is non-blocking and registered with the runtime's reactor, and is read only when the
//! reactor reports it readable. No reader thread to start, wake or stop, and no unsafe code.
//!
//! *How it is registered, and why so:* nix's [`Inotify`] owns the descriptor and parses the events; a duplicate of
//! the descriptor (an [`OwnedFd`], so tokio owns it for as long as it uses it) is registered through
//! [`pipe::Receiver::from_owned_fd_unchecked`], tokio's one safe registration of a descriptor it did not open, and is
//! used for its readiness alone (never read through it). `AsyncFd` would be the natural type, but since tokio 1.54
//! registering one is `unsafe` (and the safe `AsyncFd::new` deprecated as unsound), and this workspace denies unsafe
//! code. Both descriptors name the same inotify instance, so readiness on one is data on the other. Dropping the watch
//! closes both, which removes every watch.
//!
//! An event says only "look again": a queue overflow, or a filesystem that reports nothing (some network and FUSE
//! volumes), loses events, so callers re-check on a timer too ([`crate::FolderChanges`], which every program waits
//! with). Watch before the first look: a file that appears in between then still wakes the next wait.

use std::io;
use std::path::Path;

use std::os::fd::{AsFd, OwnedFd};

pub use nix::sys::inotify::{AddWatchFlags, InotifyEvent, WatchDescriptor};
use nix::sys::inotify::{InitFlags, Inotify};
use tokio::net::unix::pipe;

/// What changes the contents of a folder of requests and results: a file created, moved in, written, closed after
/// writing, removed, or moved away.
pub const CONTENT_CHANGES: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM);

/// An inotify instance on the async runtime.
#[derive(Debug)]
pub struct FolderWatch {
    inotify: Inotify,
    /// The same instance on the reactor, for its readiness.
    readiness: pipe::Receiver,
}

impl FolderWatch {
    /// An instance that watches nothing yet. Call within a tokio runtime that has IO enabled.
    pub fn new() -> io::Result<Self> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let duplicate: OwnedFd = inotify.as_fd().try_clone_to_owned()?;
        let readiness = pipe::Receiver::from_owned_fd_unchecked(duplicate)?;
        Ok(FolderWatch { inotify, readiness })
    }

    /// Watches `dir` for `mask`. Watching the same folder again replaces its mask (and returns the same descriptor):
    /// give one folder all it needs in one call.
    pub fn add(&self, dir: &Path, mask: AddWatchFlags) -> io::Result<WatchDescriptor> {
        Ok(self.inotify.add_watch(dir, mask)?)
    }

    /// The next events, waiting until there is at least one. Cancel-safe: events not read stay queued.
    pub async fn next_batch(&self) -> io::Result<Vec<InotifyEvent>> {
        loop {
            self.readiness.readable().await?;
            // A read that would block clears the readiness, and the loop waits again.
            match self.readiness.try_io(|| self.inotify.read_events().map_err(io::Error::from)) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                batch => return batch,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_new_file_wakes_the_wait_and_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let watch = FolderWatch::new().unwrap();
        let wd = watch.add(dir.path(), CONTENT_CHANGES).unwrap();
        std::fs::write(dir.path().join("request-1.json"), "{}").unwrap();
        let batch = tokio::time::timeout(Duration::from_secs(20), watch.next_batch()).await.unwrap().unwrap();
        let first = &batch[0];
        assert_eq!((first.wd, first.name.as_deref()), (wd, Some(std::ffi::OsStr::new("request-1.json"))));
        assert!(first.mask.contains(AddWatchFlags::IN_CREATE), "{:?}", first.mask);
    }

    #[tokio::test]
    async fn nothing_happening_means_no_wake_up() {
        let dir = tempfile::tempdir().unwrap();
        let watch = FolderWatch::new().unwrap();
        watch.add(dir.path(), CONTENT_CHANGES).unwrap();
        // A file elsewhere is no event here; the wait is still pending when the timer fires.
        std::fs::write(tempfile::NamedTempFile::new().unwrap().path(), "x").unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(100), watch.next_batch()).await.is_err());
    }
}
