//! The spill writer of a running named run: a blocking-pool thread that makes its writes to the spill files, so
//! that disk I/O (which the kernel may throttle for long when dirty pages pile up) never blocks a runtime worker,
//! and the copy into the page cache may overlap with the command's reading and its readers' encoding. Started at
//! the run's first spill: a run whose output stays in memory has none. [`WRITES_IN_FLIGHT`] chunks may wait for it;
//! beyond that the run's task waits, and through it the command's pipe, so a slow disk slows the command rather
//! than filling memory. Readers take waiting chunks from memory meanwhile (see [`super::log`]).

use std::sync::Arc;

use protocol::StreamKind;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::log::Pending;
use super::NamedRun;

/// Chunks (each up to 64 KiB) a run may have waiting for its writer: 512 KiB per running run at most.
pub const WRITES_IN_FLIGHT: usize = 8;

/// The writer of one run.
#[derive(Debug)]
pub struct SpillWriter {
    writes: mpsc::Sender<(StreamKind, Pending)>,
    thread: JoinHandle<()>,
}

impl SpillWriter {
    pub fn start(run: Arc<NamedRun>) -> Self {
        let (writes, mut queue) = mpsc::channel::<(StreamKind, Pending)>(WRITES_IN_FLIGHT);
        let thread = tokio::task::spawn_blocking(move || {
            while let Some((kind, pending)) = queue.blocking_recv() {
                let result = pending.write();
                run.written(kind, &pending, result);
            }
        });
        SpillWriter { writes, thread }
    }

    /// Queues `pending` (waits while [`WRITES_IN_FLIGHT`] are queued).
    pub async fn write(&self, kind: StreamKind, pending: Pending) {
        // The thread ends only once this sender is dropped, so the send cannot fail.
        let _ = self.writes.send((kind, pending)).await;
    }

    /// Waits until every queued write is made.
    pub async fn finish(self) {
        drop(self.writes);
        let _ = self.thread.await;
    }
}
