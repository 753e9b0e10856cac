//! Where a command's output goes: collected with a cap, or streamed chunk by chunk with backpressure.

use super::head_tail::HeadTail;
use futures_util::FutureExt;
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
    /// Keep, of each of stdout and stderr, what its encoding in a JSON reply (escaped text, plus base64 when not
    /// UTF-8: see `protocol::reply_text`) fits in `budget` bytes: all of it, or else the first and the last part
    /// with the cut marked (see `head_tail`); read and drop the rest. What a reply holds is then bounded by its
    /// encoded size, whatever bytes the command prints.
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
    /// When `bytes` are a head and a tail (a `/exec` reply's cut): the head's length, the bytes before the marker,
    /// which are exactly the stream's first ones. A client writing a reply as it arrives counts only those as
    /// stream offsets (`protocol::OUTPUT_HEAD_HEADER`).
    pub head: Option<usize>,
}

/// When a command last wrote a byte to either pipe (its start, before it wrote any): what its idle timeout counts
/// from. Shared by the command's two pipe readers.
#[derive(Debug)]
pub struct LastOutput {
    started: std::time::Instant,
    /// Milliseconds from `started` to the last output.
    after_ms: std::sync::atomic::AtomicU64,
}

impl LastOutput {
    pub fn new() -> Self {
        LastOutput { started: std::time::Instant::now(), after_ms: std::sync::atomic::AtomicU64::new(0) }
    }

    /// Output arrived now.
    pub fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.after_ms.fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// When output last arrived.
    pub fn at(&self) -> std::time::Instant {
        self.started + std::time::Duration::from_millis(self.after_ms.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Default for LastOutput {
    fn default() -> Self {
        LastOutput::new()
    }
}

/// After `stop`, how much more of what is already in a pipe is read: a descendant may keep writing forever.
const AFTER_STOP: u64 = 1 << 20;

/// Reads `pipe` to its end, or until `stop` fires (the drain window after the leader exited has passed) and what
/// is already in the pipe (up to [`AFTER_STOP`]) has been read. `stop` only ends a wait for *more* bytes: it never
/// interrupts handing a chunk already read to a slow stream reader, nor drops bytes already in the pipe, so a
/// stream's client that reads slowly still gets all the output a command wrote before it exited.
pub async fn read_pipe<R: AsyncRead + Unpin>(
    mut pipe: R,
    kind: StreamKind,
    output: Output,
    stop: CancellationToken,
    last_output: std::sync::Arc<LastOutput>,
) -> Captured {
    let mut captured = Captured::default();
    // `Json`: what this pipe keeps so far, within the budget (made at the first read).
    let mut budgeted: Option<HeadTail> = None;
    // Most commands print little: start small and grow to READ_SIZE only when reads fill the buffer, so hundreds
    // of quiet commands do not each hold 128 KiB of buffers.
    let mut buf = vec![0u8; 4096];
    let mut after_stop = 0u64;
    loop {
        let read = if stop.is_cancelled() {
            // Take what is already there, never wait for more.
            match pipe.read(&mut buf).now_or_never() {
                Some(read) => read,
                None => break,
            }
        } else {
            tokio::select! {
                biased;
                read = pipe.read(&mut buf) => read,
                () = stop.cancelled() => continue,
            }
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let full = n == buf.len();
        captured.total += n as u64;
        last_output.touch();
        match &output {
            Output::Collect { cap } => {
                let room = cap.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&buf[..n.min(room)]);
                captured.truncated |= n > room;
            }
            Output::Json { budget } => budgeted.get_or_insert_with(|| HeadTail::new(*budget)).push(&buf[..n]),
            Output::Stream(tx) => {
                let chunk = OutputChunk { kind, bytes: buf[..n].to_vec() };
                // A closed receiver means the transport is gone and cancellation follows: keep draining. A slow
                // one is waited for (backpressure); a client that never reads is ended by its connection's end.
                let _ = tx.send(chunk).await;
            }
        }
        if stop.is_cancelled() {
            after_stop += n as u64;
            if after_stop >= AFTER_STOP {
                break;
            }
        }
        if full && buf.len() < READ_SIZE {
            buf.resize((buf.len() * 4).min(READ_SIZE), 0);
        }
    }
    if let Some(kept) = budgeted {
        captured.head = kept.head_len();
        (captured.bytes, captured.truncated) = kept.finish();
    }
    captured
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::*;

    /// The drain window passing (`stop`) while a slow stream reader holds a chunk must lose nothing: neither the
    /// chunk being handed over nor what is still in the pipe.
    #[tokio::test]
    async fn stop_never_drops_output_a_slow_stream_reader_has_not_taken_yet() {
        let total = 200 * 1024;
        let (mut writer, pipe) = tokio::io::duplex(total);
        writer.write_all(&vec![b'x'; total]).await.unwrap();
        drop(writer);
        let (tx, mut rx) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let reader =
            tokio::spawn(read_pipe(pipe, StreamKind::Stdout, Output::Stream(tx), stop.clone(), Default::default()));
        // The reader has filled the channel and waits to hand over its next chunk.
        while rx.is_empty() {
            tokio::task::yield_now().await;
        }
        stop.cancel();
        // Give a reader that would give up on `stop` the chance to (it must not).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut received = 0;
        while let Some(chunk) = rx.recv().await {
            received += chunk.bytes.len();
        }
        assert_eq!(received, total);
        assert_eq!(reader.await.unwrap().total, total as u64);
    }
}
