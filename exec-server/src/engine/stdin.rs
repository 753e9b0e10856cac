//! A command's stdin fed while it runs (`stdin_stream`): the transport holds a [`StdinFeed`] and sends chunks; the
//! engine holds the [`StdinStream`] and writes them into the command's stdin pipe (or a TTY run's terminal) as fast as
//! the command reads. Dropping the feed's sender is the EOF. Both sides share what the pipe has taken and whether it is
//! closed, so that the transport can bound what it holds and stop taking input once nothing more can go in.
//!
//! When the command ends, the bytes it took from its pipe are known exactly: the bytes written into it less those
//! still unread (`FIONREAD` on the pipe). After the EOF the write end is closed (the command must see the end), so a
//! read end of the same pipe, opened through `/proc/self/fd`, is kept for that count instead: holding a read end
//! never delays an EOF (that waits for writers only), and it is opened only when nothing more will be written, so it
//! cannot hide a closed reader from a write (EPIPE) either.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Why a command's stdin takes no more input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinClosed {
    /// Every byte was written and the pipe closed, as the feed asked (its EOF).
    Eof,
    /// The command closed its end (a write failed with EPIPE): what it did not read is discarded, as a write to a
    /// closed pipe is.
    BrokenPipe,
    /// The command ended (or never started).
    Ended,
}

/// What both sides share.
#[derive(Debug)]
struct Shared {
    /// Bytes written into the pipe (or terminal) so far.
    written: AtomicU64,
    closed: Mutex<Option<StdinClosed>>,
    /// Bumped at every change of the two above.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn close(&self, why: StdinClosed) {
        self.closed.lock().unwrap().get_or_insert(why);
        self.changed.send_modify(|generation| *generation += 1);
    }
}

/// The transport's end: chunks in, and what became of them.
#[derive(Debug)]
pub struct StdinFeed {
    /// `None` once the EOF was sent.
    chunks: Mutex<Option<mpsc::UnboundedSender<Bytes>>>,
    shared: Arc<Shared>,
}

/// The engine's end, given to the job: the chunks to write.
#[derive(Debug)]
pub struct StdinStream {
    chunks: mpsc::UnboundedReceiver<Bytes>,
    shared: Arc<Shared>,
}

/// A feed and the stream it feeds. The channel is unbounded: the transport bounds what it sends by what the pipe has
/// taken ([`StdinFeed::unwritten`]), in bytes, which a channel of chunks could not.
pub fn stdin_stream() -> (StdinFeed, StdinStream) {
    let (sender, chunks) = mpsc::unbounded_channel();
    let shared =
        Arc::new(Shared { written: AtomicU64::new(0), closed: Mutex::new(None), changed: watch::Sender::new(0) });
    (StdinFeed { chunks: Mutex::new(Some(sender)), shared: shared.clone() }, StdinStream { chunks, shared })
}

impl StdinFeed {
    /// Queues `bytes` for the command (dropped when stdin is already closed).
    pub fn send(&self, bytes: Bytes) {
        if let Some(chunks) = &*self.chunks.lock().unwrap() {
            let _ = chunks.send(bytes);
        }
    }

    /// The EOF: once every queued byte is written, the command's stdin is closed.
    pub fn finish(&self) {
        self.chunks.lock().unwrap().take();
    }

    /// Bytes the pipe has taken so far.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Acquire)
    }

    /// Why stdin takes no more input, once it does not.
    pub fn closed(&self) -> Option<StdinClosed> {
        *self.shared.closed.lock().unwrap()
    }

    /// The command has ended (or will never start): nothing more goes in.
    pub fn ended(&self) {
        self.finish();
        self.shared.close(StdinClosed::Ended);
    }

    /// A receiver that wakes when the pipe takes bytes or closes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }
}

/// What the feeder leaves when the command has ended: the count of written bytes and the descriptor that tells how
/// many of them are still unread.
#[derive(Debug)]
pub struct Fed {
    written: u64,
    /// The write end (still open), or a read end opened at the EOF; `None` for a terminal, or when `/proc` could not
    /// give a read end.
    unread_probe: Option<Probe>,
}

#[derive(Debug)]
enum Probe {
    Write(tokio::process::ChildStdin),
    Read(File),
}

impl Fed {
    /// The bytes the command took from its stdin: written, less what the pipe still holds. `None` when that cannot
    /// be told.
    pub fn consumed(&self) -> Option<u64> {
        let unread = match self.unread_probe.as_ref()? {
            Probe::Write(pipe) => rustix::io::ioctl_fionread(pipe.as_fd()),
            Probe::Read(pipe) => rustix::io::ioctl_fionread(pipe.as_fd()),
        };
        unread.ok().map(|unread| self.written.saturating_sub(unread))
    }
}

/// Writes the stream's chunks into `pipe` until the EOF, a failed write, or `stop` (the command ended). Returns what
/// [`Fed::consumed`] needs once `stop` has fired (never earlier: the count is taken when the command has ended).
pub async fn feed_pipe(stream: StdinStream, pipe: tokio::process::ChildStdin, stop: CancellationToken) -> Fed {
    let StdinStream { chunks, shared } = stream;
    let (written, pipe) = feed(chunks, &shared, pipe, &stop).await;
    let unread_probe = match pipe {
        PipeLeft::Open(pipe) => Some(Probe::Write(pipe)),
        PipeLeft::Eof(pipe) => {
            // Opened before the write end is closed, so the pipe cannot be gone in between.
            let reader = reopen_for_reading(&pipe);
            drop(pipe);
            if reader.is_none() {
                tracing::warn!("cannot open a read end of a stdin pipe through /proc: stdin_consumed is not reported");
            }
            shared.close(StdinClosed::Eof);
            reader.map(Probe::Read)
        }
    };
    stop.cancelled().await;
    shared.close(StdinClosed::Ended);
    Fed { written, unread_probe }
}

/// Writes the stream's chunks into a TTY run's terminal until `stop`. A terminal has no EOF; a failed write means
/// the terminal is gone. What a terminal's reader took is not counted: the line discipline reads the bytes.
pub async fn feed_terminal<W: AsyncWrite + Unpin>(stream: StdinStream, terminal: W, stop: CancellationToken) -> Fed {
    let StdinStream { chunks, shared } = stream;
    let (written, _) = feed(chunks, &shared, terminal, &stop).await;
    stop.cancelled().await;
    shared.close(StdinClosed::Ended);
    Fed { written, unread_probe: None }
}

/// How [`feed`] left the pipe.
enum PipeLeft<W> {
    /// Still open: stopped, or a write failed.
    Open(W),
    /// Every chunk written and the EOF reached: to be closed.
    Eof(W),
}

/// The writing itself: each chunk in order, as fast as the pipe takes it, counting every byte it took.
async fn feed<W: AsyncWrite + Unpin>(
    mut chunks: mpsc::UnboundedReceiver<Bytes>,
    shared: &Shared,
    mut pipe: W,
    stop: &CancellationToken,
) -> (u64, PipeLeft<W>) {
    let mut written = 0u64;
    loop {
        let chunk = tokio::select! {
            biased;
            () = stop.cancelled() => return (written, PipeLeft::Open(pipe)),
            chunk = chunks.recv() => chunk,
        };
        let Some(chunk) = chunk else { return (written, PipeLeft::Eof(pipe)) };
        let mut at = 0;
        while at < chunk.len() {
            // `write` is cancel-safe: a stop between writes loses nothing that was counted.
            let result = tokio::select! {
                biased;
                () = stop.cancelled() => return (written, PipeLeft::Open(pipe)),
                result = pipe.write(&chunk[at..]) => result,
            };
            match result {
                Ok(n) if n > 0 => {
                    at += n;
                    written += n as u64;
                    shared.written.fetch_add(n as u64, Ordering::Release);
                    shared.changed.send_modify(|generation| *generation += 1);
                }
                // EPIPE (the command closed its stdin), or a terminal that is gone.
                Ok(_) | Err(_) => {
                    shared.close(StdinClosed::BrokenPipe);
                    return (written, PipeLeft::Open(pipe));
                }
            }
        }
    }
}

/// A new read end of the pipe `pipe` writes to, non-blocking (it is never read, only asked how much it holds).
fn reopen_for_reading(pipe: &impl AsFd) -> Option<File> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", pipe.as_fd().as_raw_fd());
    let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
    File::options().read(true).custom_flags(nonblocking).open(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe of our own as a child's stdin: `head -c N` takes N bytes and exits; the count says N whatever was
    /// written, with the stdin still open and after the EOF.
    #[tokio::test]
    async fn consumed_is_what_the_command_read_open_or_after_the_eof() {
        for (eof, take) in [(false, 3000), (true, 3000), (true, 0)] {
            let mut child = tokio::process::Command::new("head")
                .args(["-c", &take.to_string()])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let (feed, stream) = stdin_stream();
            let stop = CancellationToken::new();
            let feeder = tokio::spawn(feed_pipe(stream, child.stdin.take().unwrap(), stop.clone()));
            feed.send(Bytes::from(vec![b'x'; 10_000]));
            let mut changes = feed.subscribe();
            while feed.written() < 10_000 && feed.closed().is_none() {
                changes.changed().await.unwrap();
            }
            if eof {
                feed.finish();
            }
            assert!(child.wait().await.unwrap().success());
            stop.cancel();
            let fed = feeder.await.unwrap();
            assert_eq!(fed.consumed(), Some(take), "eof {eof}");
            assert!(feed.closed().is_some(), "after the end nothing goes in");
        }
    }

    /// A command that closes its stdin: the next write fails, and stdin closes as `BrokenPipe`.
    #[tokio::test]
    async fn a_closed_reader_closes_the_feed() {
        let mut child = tokio::process::Command::new("true").stdin(std::process::Stdio::piped()).spawn().unwrap();
        let pipe = child.stdin.take().unwrap();
        assert!(child.wait().await.unwrap().success());
        let (feed, stream) = stdin_stream();
        let stop = CancellationToken::new();
        let feeder = tokio::spawn(feed_pipe(stream, pipe, stop.clone()));
        feed.send(Bytes::from_static(b"never read\n"));
        let mut changes = feed.subscribe();
        while feed.closed().is_none() {
            changes.changed().await.unwrap();
        }
        assert_eq!(feed.closed(), Some(StdinClosed::BrokenPipe));
        stop.cancel();
        assert_eq!(feeder.await.unwrap().consumed(), Some(0));
    }
}
