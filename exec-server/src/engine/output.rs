//! Where a command's output goes: collected with a cap, or streamed chunk by chunk with backpressure.

use protocol::reply_text::BudgetedBytes;
use protocol::StreamKind;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Bytes per read from a pipe: one frame's worth at most, and the unit of backpressure.
pub const READ_SIZE: usize = 64 * 1024;

/// What the engine does with a command's output. Each pipe's reader gets its own clone.
#[derive(Debug, Clone)]
pub enum Output {
    /// Keep up to `cap` bytes of each of stdout and stderr; read and drop the rest so the command never blocks.
    Collect { cap: usize },
    /// Keep, of each of stdout and stderr, the longest prefix whose encoding in a JSON reply (escaped text, plus
    /// base64 when not UTF-8: see `protocol::reply_text`) fits in `budget` bytes; read and drop the rest. What a
    /// reply holds is then bounded by its encoded size, whatever bytes the command prints.
    Json { budget: usize },
    /// Send every chunk as it is read. The channel is bounded: when the receiver is slow, reading stops, the pipe
    /// fills and the command blocks in `write`, so memory stays bounded whatever the command prints.
    Stream(mpsc::Sender<OutputChunk>),
}

/// A piece of output read from one pipe.
#[derive(Debug)]
pub struct OutputChunk {
    pub kind: StreamKind,
    pub bytes: Vec<u8>,
}

/// What was kept of one pipe.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    /// The kept bytes (always empty when streaming).
    pub bytes: Vec<u8>,
    /// Whether bytes were dropped because of the cap.
    pub truncated: bool,
    /// Every byte read, kept or not.
    pub total: u64,
}

/// Reads `pipe` to its end, or until `stop` fires (the drain window after the leader exited has passed).
pub async fn read_pipe<R: AsyncRead + Unpin>(
    mut pipe: R,
    kind: StreamKind,
    output: Output,
    stop: CancellationToken,
) -> Captured {
    let mut captured = Captured::default();
    // `Json`: what this pipe keeps so far, within the budget (made at the first read).
    let mut budgeted: Option<BudgetedBytes> = None;
    // Most commands print little: start small and grow to READ_SIZE only when reads fill the buffer, so hundreds
    // of quiet commands do not each hold 128 KiB of buffers.
    let mut buf = vec![0u8; 4096];
    loop {
        let read = tokio::select! {
            read = pipe.read(&mut buf) => read,
            () = stop.cancelled() => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let full = n == buf.len();
        captured.total += n as u64;
        match &output {
            Output::Collect { cap } => {
                let room = cap.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&buf[..n.min(room)]);
                captured.truncated |= n > room;
            }
            Output::Json { budget } => budgeted.get_or_insert_with(|| BudgetedBytes::new(*budget)).push(&buf[..n]),
            Output::Stream(tx) => {
                let chunk = OutputChunk { kind, bytes: buf[..n].to_vec() };
                tokio::select! {
                    // A closed receiver means the transport is gone and cancellation follows: keep draining.
                    _ = tx.send(chunk) => {}
                    () = stop.cancelled() => break,
                }
            }
        }
        if full && buf.len() < READ_SIZE {
            buf.resize((buf.len() * 4).min(READ_SIZE), 0);
        }
    }
    if let Some(kept) = budgeted {
        (captured.bytes, captured.truncated) = kept.finish();
    }
    captured
}
