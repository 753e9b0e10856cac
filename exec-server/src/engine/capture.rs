//! Where a command's output goes: each pipe's bytes go to a sink its transport supplies ([`Capture`]), which keeps
//! what that transport needs or passes the bytes on. Two transport-free ones are here: a capped prefix
//! ([`Collect`]) and a bounded channel of chunks ([`Relay`]); a transport with its own rule (HTTP's reply budget)
//! brings its own.
//!
//! *Names:* in this server "stream" means one thing, an output pipe as the wire names it ([`StreamKind`]: stdout or
//! stderr), and what carries them (`/exec/stream`'s events, a named run's [`crate::runs::OutputLog`] per pipe).
//! `StreamKind` stays the protocol's: the clients match on it and the frames' `"stream"` field is its name. The
//! capture that hands chunks on is a [`Relay`]; an accepted connection is the HTTP layer's `Accepted`.

use std::future::Future;

use futures_util::FutureExt;
use protocol::StreamKind;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Bytes per read from a pipe: one frame's worth at most, and the unit of backpressure.
pub const READ_SIZE: usize = 64 * 1024;

/// What a transport does with a command's output: one [`Sink`] per pipe, made when the command starts.
pub trait Capture: Send + 'static {
    type Sink: Sink;

    /// The sink for the pipe of stream `kind`.
    fn sink(&self, kind: StreamKind) -> Self::Sink;
}

/// One pipe's share of a [`Capture`].
pub trait Sink: Send + 'static {
    /// What the sink holds once the pipe has ended (the transport's own: bytes for a reply, or nothing).
    type Kept: Send + 'static;

    /// Takes the next bytes read from the pipe. The pipe is not read while this waits, so a sink that waits for a
    /// slow consumer holds the command in `write` (backpressure): memory stays bounded whatever it prints.
    fn take(&mut self, bytes: &[u8]) -> impl Future<Output = ()> + Send;

    /// The pipe has ended: what was kept.
    fn finish(self) -> Self::Kept;
}

/// Keep up to `cap` bytes of each of stdout and stderr; read and drop the rest so the command never blocks.
#[derive(Debug, Clone, Copy)]
pub struct Collect {
    pub cap: usize,
}

/// What [`Collect`] kept of one pipe.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    pub bytes: Vec<u8>,
    /// Bytes were dropped because of the cap.
    pub truncated: bool,
}

/// [`Collect`]'s sink for one pipe.
#[derive(Debug)]
pub struct Prefix {
    cap: usize,
    kept: Collected,
}

impl Capture for Collect {
    type Sink = Prefix;

    fn sink(&self, _kind: StreamKind) -> Prefix {
        Prefix { cap: self.cap, kept: Collected::default() }
    }
}

impl Sink for Prefix {
    type Kept = Collected;

    async fn take(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.kept.bytes.len());
        self.kept.bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.kept.truncated |= bytes.len() > room;
    }

    fn finish(self) -> Collected {
        self.kept
    }
}

/// Chunks in flight between a command's pipes and the consumer of a [`Relay`]: with [`READ_SIZE`] reads this bounds
/// what a stream holds in memory.
pub const CHUNKS_IN_FLIGHT: usize = 4;

/// Send every chunk as it is read, over a bounded channel: when the receiver is slow, reading stops, the pipe fills
/// and the command blocks in `write`, so memory stays bounded whatever the command prints.
#[derive(Debug, Clone)]
pub struct Relay {
    chunks: mpsc::Sender<OutputChunk>,
}

impl Relay {
    /// The capture, and the receiver of its chunks (both pipes', in the order they were read). The channel closes
    /// once both pipes have ended.
    pub fn channel() -> (Relay, mpsc::Receiver<OutputChunk>) {
        let (chunks, receiver) = mpsc::channel(CHUNKS_IN_FLIGHT);
        (Relay { chunks }, receiver)
    }
}

/// A piece of output read from one pipe.
#[derive(Debug)]
pub struct OutputChunk {
    pub kind: StreamKind,
    pub bytes: Vec<u8>,
}

/// [`Relay`]'s sink for one pipe: its own sender, dropped when the pipe ends, so no sender outlives the pipes.
#[derive(Debug)]
pub struct Forward {
    kind: StreamKind,
    chunks: mpsc::Sender<OutputChunk>,
}

impl Capture for Relay {
    type Sink = Forward;

    fn sink(&self, kind: StreamKind) -> Forward {
        Forward { kind, chunks: self.chunks.clone() }
    }
}

impl Sink for Forward {
    type Kept = ();

    async fn take(&mut self, bytes: &[u8]) {
        let chunk = OutputChunk { kind: self.kind, bytes: bytes.to_vec() };
        // A closed receiver means the transport is gone and cancellation follows: keep draining. A slow one is
        // waited for (backpressure); a client that never reads is ended by its connection's end.
        let _ = self.chunks.send(chunk).await;
    }

    fn finish(self) {}
}

/// When a command last wrote a byte to either pipe (its start, before it wrote any): what its idle timeout counts
/// from. Shared by the command's two pipe readers.
#[derive(Debug)]
pub(super) struct LastOutput {
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

/// One pipe, read to its end: every byte it carried (kept or not), and what its sink kept.
#[derive(Debug)]
pub(super) struct Piped<K> {
    pub total: u64,
    pub kept: K,
}

/// Reads `pipe` to its end into `sink`, or until `stop` fires (the drain window after the leader exited has passed)
/// and what is already in the pipe (up to [`AFTER_STOP`]) has been read. `stop` only ends a wait for *more* bytes:
/// it never interrupts handing a chunk already read to a slow sink, nor drops bytes already in the pipe, so a
/// stream's client that reads slowly still gets all the output a command wrote before it exited.
pub(super) async fn read_pipe<R: AsyncRead + Unpin, S: Sink>(
    mut pipe: R,
    mut sink: S,
    stop: CancellationToken,
    last_output: std::sync::Arc<LastOutput>,
) -> Piped<S::Kept> {
    let mut total = 0u64;
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
        total += n as u64;
        last_output.touch();
        sink.take(&buf[..n]).await;
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
    Piped { total, kept: sink.finish() }
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
        let (stream, mut rx) = Relay::channel();
        let stop = CancellationToken::new();
        let sink = stream.sink(StreamKind::Stdout);
        drop(stream);
        let reader = tokio::spawn(read_pipe(pipe, sink, stop.clone(), Default::default()));
        // The reader has filled the channel and waits to hand over its next chunk.
        while rx.len() < CHUNKS_IN_FLIGHT {
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

    #[tokio::test]
    async fn collect_keeps_a_prefix_and_says_when_it_cut() {
        let (mut writer, pipe) = tokio::io::duplex(64);
        let write = tokio::spawn(async move { writer.write_all(b"0123456789").await });
        let piped =
            read_pipe(pipe, Collect { cap: 4 }.sink(StreamKind::Stdout), Default::default(), Default::default());
        let piped = piped.await;
        write.await.unwrap().unwrap();
        assert_eq!((piped.total, piped.kept), (10, Collected { bytes: b"0123".to_vec(), truncated: true }));
    }
}
