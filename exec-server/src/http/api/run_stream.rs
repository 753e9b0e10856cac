//! A named run's output as server-sent events, read from its log: replayed from the offsets asked for, then followed
//! live, ending with the error and exit frames. The frames are those of `/exec/stream`, with offsets, `dropped`
//! frames where the log lost its middle, and the streams' totals in the exit frame. The source is the run's log;
//! [`super::sse`] pumps it, and the source holds the reader's attachment and its place among the run's followers.

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::watch;

use super::sse::{self, FrameSource, Step};
use crate::engine::READ_SIZE;
use crate::runs::{Attachment, Follower, NamedRun, Read};

/// The SSE response for `run` from `offsets` (stdout, stderr). `attachment` is held while the client reads.
/// `b64_only`: this reader's choice (see [`protocol::ExecRequest::b64_only`]); the log keeps raw bytes, so each
/// reader of the same run gets the frames it asked for.
pub fn response(
    run: Arc<NamedRun>,
    offsets: [u64; 2],
    b64_only: bool,
    attachment: Attachment,
    keepalive: Duration,
) -> Response {
    let encoders = [
        FrameEncoder::new(StreamKind::Stdout, READ_SIZE).with_offsets(offsets[0]).b64_only(b64_only),
        FrameEncoder::new(StreamKind::Stderr, READ_SIZE).with_offsets(offsets[1]).b64_only(b64_only),
    ];
    let changed = run.subscribe();
    let follower = run.follow(offsets);
    // A terminal's output goes out as it comes: a prompt or an echoed key is not a line to wait for.
    let immediate = run.terminal().is_some();
    let source = RunLog { run, offsets, changed, follower, immediate, _attachment: attachment };
    sse::response(source, encoders, keepalive)
}

/// A reader's way through a run's log.
struct RunLog {
    run: Arc<NamedRun>,
    /// Where the reader is in each stream (stdout, stderr).
    offsets: [u64; 2],
    changed: watch::Receiver<u64>,
    /// The command waits for this reader (see [`NamedRun::paced`]).
    follower: Follower,
    /// Send what was read at once, unfinished line or not (a terminal's output: keystroke echo latency).
    immediate: bool,
    _attachment: Attachment,
}

impl FrameSource for RunLog {
    async fn next(&mut self, encoders: &mut [FrameEncoder; 2], out: &mut Vec<Vec<u8>>) -> Step {
        loop {
            self.changed.borrow_and_update();
            // The bytes are taken under the run's lock, encoded outside it: the command's output never waits for a
            // reader's encoding.
            let mut progress = false;
            for (index, kind) in [StreamKind::Stdout, StreamKind::Stderr].into_iter().enumerate() {
                progress |= read_some(&self.run, kind, &mut self.offsets[index], &mut encoders[index], out);
            }
            if progress {
                if self.immediate {
                    for encoder in encoders.iter_mut() {
                        encoder.flush(out);
                    }
                }
                return Step::More;
            }
            match self.run.progress() {
                (_, None) => {}
                // Bytes may have come between the reads above and the end: read on until both are at their totals.
                (totals, Some(_)) if self.offsets[0] < totals[0] || self.offsets[1] < totals[1] => continue,
                (totals, Some(end)) => return Step::End(end.frames(Some(totals))),
            }
            // Caught up with a run still going: wait for its next change.
            let _ = self.changed.changed().await;
        }
    }

    fn sent(&mut self) {
        self.follower.at(self.offsets);
    }
}

/// Reads the next piece of stream `kind` from `offset` into frames; false when there was nothing.
fn read_some(
    run: &NamedRun,
    kind: StreamKind,
    offset: &mut u64,
    encoder: &mut FrameEncoder,
    out: &mut Vec<Vec<u8>>,
) -> bool {
    let gap = match run.read(kind, *offset, READ_SIZE) {
        Ok(Read::Bytes(bytes)) => {
            *offset += bytes.len() as u64;
            encoder.push(&bytes, out);
            return true;
        }
        Ok(Read::End) => return false,
        Ok(Read::Dropped(gap)) => gap,
        Err(err) => {
            // The spill file could not be read: what is left of it is reported as dropped, never made up.
            tracing::warn!(error = %err, "cannot read a named run's output");
            run.total(kind).saturating_sub(*offset)
        }
    };
    if gap == 0 {
        return false;
    }
    encoder.flush(out);
    out.push(Frame::Dropped { stream: kind, offset: *offset, bytes: gap }.to_event());
    *offset += gap;
    encoder.jump_to(*offset);
    true
}
