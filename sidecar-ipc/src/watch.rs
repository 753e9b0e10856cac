//! Waiting for something to change in the IPC folders: inotify wake-ups, with a re-check every second for
//! filesystems where inotify does not fire (some network and FUSE volumes).
//!
//! Callers are level-triggered: watch first, then check the files, then wait, then check again. An event only means
//! "look again", so a lost or merged event (or a queue overflow) costs nothing, and watching before the first check
//! means a file that appears in between still ends the next wait at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::{sleep_until, Instant};

/// The longest a wait lasts without an event: the bounded re-check.
pub const FALLBACK: Duration = Duration::from_secs(1);

pub struct Watcher {
    inotify: Option<Watching>,
}

struct Watching {
    inotify: Arc<Inotify>,
    watches: Vec<WatchDescriptor>,
    /// One pending wake-up at most: a burst of events is one "look again". A blocking reader thread feeds it, which
    /// keeps this free of unsafe fd registration with the async runtime.
    woken: mpsc::Receiver<()>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        // Close first, then remove the watches: their IN_IGNORED events wake the reader, whose send then fails for
        // certain, and it ends.
        self.woken.close();
        for watch in self.watches.drain(..) {
            let _ = self.inotify.rm_watch(watch);
        }
    }
}

impl Watcher {
    /// Watches `dirs` (which must exist). Without inotify, waits fall back to the periodic re-check alone.
    pub fn new(dirs: &[PathBuf]) -> Self {
        match watch(dirs) {
            Ok(watching) => Watcher { inotify: Some(watching) },
            Err(err) => {
                eprintln!("sidecar-ipc: cannot watch {dirs:?} with inotify ({err}); checking every second instead");
                Watcher { inotify: None }
            }
        }
    }

    /// Returns when something changed in a watched folder, after [`FALLBACK`], or at `deadline`, whichever is first.
    pub async fn wait(&mut self, deadline: Option<Instant>) {
        let mut until = Instant::now() + FALLBACK;
        if let Some(deadline) = deadline {
            until = until.min(deadline);
        }
        let Some(watching) = &mut self.inotify else { return sleep_until(until).await };
        tokio::select! {
            woken = watching.woken.recv() => if woken.is_none() {
                // The reader failed: from now on, the periodic re-check alone.
                self.inotify = None;
                sleep_until(until).await;
            },
            () = sleep_until(until) => {}
        }
    }
}

fn watch(dirs: &[PathBuf]) -> std::io::Result<Watching> {
    let inotify = Arc::new(Inotify::init(InitFlags::IN_CLOEXEC)?);
    let flags = AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_DELETE;
    let mut watches = Vec::with_capacity(dirs.len());
    for dir in dirs {
        watches.push(inotify.add_watch(dir.as_path(), flags)?);
    }
    let (wake, woken) = mpsc::channel(1);
    let reader = inotify.clone();
    std::thread::Builder::new().name("inotify".into()).spawn(move || {
        while reader.read_events().is_ok() {
            if let Err(TrySendError::Closed(())) = wake.try_send(()) {
                break;
            }
        }
    })?;
    Ok(Watching { inotify, watches, woken })
}
