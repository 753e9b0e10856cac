//! Waiting for something to change in the IPC folders: inotify wake-ups ([`agent_files::watch`]), with a re-check
//! every second for filesystems where inotify does not fire (some network and FUSE volumes).
//!
//! Callers are level-triggered: watch first, then check the files, then wait, then check again. An event only means
//! "look again", so a lost or merged event (or a queue overflow) costs nothing, and watching before the first check
//! means a file that appears in between still ends the next wait at once.

use std::path::PathBuf;
use std::time::Duration;

use agent_files::watch::{FolderWatch, CONTENT_CHANGES};
use tokio::time::{sleep_until, Instant};

/// The longest a wait lasts without an event: the bounded re-check.
pub const FALLBACK: Duration = Duration::from_secs(1);

/// Changes in a few folders, as wake-ups.
pub struct Changes {
    /// `None` without inotify: waits are then the periodic re-check alone.
    inotify: Option<FolderWatch>,
}

impl Changes {
    /// Watches `dirs` (which must exist). Without inotify, waits fall back to the periodic re-check alone.
    pub fn watch(dirs: &[PathBuf]) -> Self {
        let watch = || -> std::io::Result<FolderWatch> {
            let watch = FolderWatch::new()?;
            for dir in dirs {
                watch.add(dir, CONTENT_CHANGES)?;
            }
            Ok(watch)
        };
        match watch() {
            Ok(watch) => Changes { inotify: Some(watch) },
            Err(err) => {
                eprintln!("sidecar-ipc: cannot watch {dirs:?} with inotify ({err}); checking every second instead");
                Changes { inotify: None }
            }
        }
    }

    /// Returns when something changed in a watched folder, after [`FALLBACK`], or at `deadline`, whichever is first.
    pub async fn wait(&mut self, deadline: Option<Instant>) {
        let mut until = Instant::now() + FALLBACK;
        if let Some(deadline) = deadline {
            until = until.min(deadline);
        }
        let Some(watch) = &self.inotify else { return sleep_until(until).await };
        tokio::select! {
            batch = watch.next_batch() => if let Err(err) = batch {
                eprintln!("sidecar-ipc: inotify failed ({err}); checking every second instead");
                self.inotify = None;
                sleep_until(until).await;
            },
            () = sleep_until(until) => {}
        }
    }
}
