//! Waiting for something to change in the IPC folders: agent-files' waits ([`FolderChanges`]) at sidecar-ipc's
//! re-check cadence ([`crate::ipc::RULES`]), with a missing inotify said once on stderr.
//!
//! Callers are level-triggered: watch first, then check the files, then wait, then check again. A wake-up only
//! means "look again", so a lost or merged event costs nothing, and watching before the first check means a file
//! that appears in between still ends the next wait at once.

use std::path::PathBuf;
use std::time::Instant;

use agent_files::{FolderChanges, Wake};

use crate::ipc::RULES;

/// Changes in a few folders, as wake-ups.
pub struct Changes {
    folders: FolderChanges,
}

impl Changes {
    /// Watches `dirs` (which must exist).
    pub fn watch(dirs: &[PathBuf]) -> Self {
        Changes { folders: FolderChanges::watch(dirs, RULES.recheck) }
    }

    /// Returns when something changed in a watched folder, the re-check is due, or at `deadline`, whichever is
    /// first.
    pub async fn wait(&mut self, deadline: Option<Instant>) {
        if let Wake::InotifyUnavailable(err) = self.folders.next(deadline).await {
            let every = self.folders.recheck_interval().as_secs_f64();
            eprintln!("sidecar-ipc: {err}; looking at the folders every {every}s instead");
        }
    }
}
