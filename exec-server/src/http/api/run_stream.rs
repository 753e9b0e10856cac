//! A named run's output as server-sent events, read from its log: replayed from the offsets asked for, then followed
//! live, ending with the error and exit frames. The frames are those of `/exec/stream`, with offsets, `dropped`
//! frames where the log lost its middle, and the streams' totals in the exit frame. The source is the run's log;
//! [`super::sse`] pumps it, and the source holds the reader's attachment and its place among the run's followers.

use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use protocol::{Frame, FrameEncoder, StreamKind};
use tokio::sync::watch;

use super::sse::{self, FrameSource, Head, Step};
use crate::ending::Ending;
use crate::engine::READ_SIZE;
use crate::runs::{Attachment, Follower, NamedRun, Read};

/// The SSE response for `run` from `offsets` (stdout, stderr). `attachment` is held while the client reads.
/// `b64_only`: this reader's choice (see [`protocol::ExecRequest::b64_only`]); the log keeps raw bytes, so each
/// reader of the same run gets the frames it asked for.
pub async fn response(
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
    // A client streams stdin (and a terminal's keys) only once the head says the run takes them.
    let head = match run.input().is_some() || immediate {
        true => Head::Now,
        false => Head::WithFirstEvents,
    };
    let source = RunLog { run, offsets, changed, follower, immediate, _attachment: attachment };
    sse::response(source, encoders, keepalive, head).await
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
                match read_some(&self.run, kind, &mut self.offsets[index], &mut encoders[index], out) {
                    Ok(read) => progress |= read,
                    Err(unreadable) => return Step::End(unreadable),
                }
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

/// Reads the next piece of stream `kind` from `offset` into frames; false when there was nothing. When the kept
/// bytes cannot be read (the spill file failed, or came back short), the frames that end this reader's stream: an
/// error frame naming it and an exit frame with code -1 and the streams' totals, as a server-side failure ends a
/// stream. Never a `dropped` frame: that would say the server chose to drop bytes, and the run's own exit code
/// after it would present what is missing as a complete, successful run.
fn read_some(
    run: &NamedRun,
    kind: StreamKind,
    offset: &mut u64,
    encoder: &mut FrameEncoder,
    out: &mut Vec<Vec<u8>>,
) -> Result<bool, Vec<Frame>> {
    let gap = match run.read(kind, *offset, READ_SIZE) {
        Ok(Read::Bytes(bytes)) => {
            *offset += bytes.len() as u64;
            encoder.push(&bytes, out);
            return Ok(true);
        }
        Ok(Read::End) => return Ok(false),
        Ok(Read::Dropped(gap)) => gap,
        Err(err) => {
            encoder.flush(out);
            let message = unreadable(run, kind, *offset, &err);
            return Err(Ending::never_ran(message).frames(Some(run.progress().0)));
        }
    };
    if gap == 0 {
        return Ok(false);
    }
    encoder.flush(out);
    out.push(Frame::Dropped { stream: kind, offset: *offset, bytes: gap }.to_event());
    *offset += gap;
    encoder.jump_to(*offset);
    Ok(true)
}

/// The message for kept output that cannot be read, also logged.
pub fn unreadable(run: &NamedRun, kind: StreamKind, offset: u64, err: &std::io::Error) -> String {
    tracing::error!(run = %run.id, stream = kind.as_str(), offset, error = %err, "cannot read a named run's kept output");
    format!(
        "the server cannot read run {}'s kept {} from byte {offset} ({err}): the output from there is lost, so this \
         replay ends here; the command's own end is in GET /runs/{}",
        run.id,
        kind.as_str(),
        run.id
    )
}
