//! The client's own stdin as a streamed run reads it: what it is, and a reader on a plain
//! `std::thread` that hands it on in chunks with bounded read-ahead.
//!
//! The reader is a `std::thread`, not tokio's blocking pool: a read that never returns (a pipe nobody closes) must
//! not hold the process at exit, and the runtime's drop would wait for a blocking-pool task. The program exits
//! through `std::process::exit`, which does not wait for it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};

use tokio::sync::mpsc;

/// The largest chunk one read hands on (and one POST carries).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks read ahead of the one being sent: with [`CHUNK_BYTES`], at most 512 KiB beyond what the server holds.
pub const READ_AHEAD: usize = 2;

/// What the client's stdin is, which decides whether it is streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinSource {
    /// `/dev/null` or closed: nothing to send; the command gets `/dev/null` (`stdin_stream` is not asked).
    Nothing,
    /// A pipe, a socket, a terminal (its cooked mode: lines as typed, Ctrl-D as EOF) or another device: read as a
    /// stream until EOF.
    Stream,
    /// A regular file (`< list`, and bash's heredocs when it makes them files): read with `pread` from its offset
    /// at `start`, which does not move while reading ahead; afterwards it is set where a native run leaves it.
    File { start: u64 },
}

/// A duplicate of descriptor 0 (the same open file description: one offset).
fn stdin_file() -> Option<File> {
    std::io::stdin().as_fd().try_clone_to_owned().ok().map(File::from)
}

impl StdinSource {
    /// Our stdin, from fstat.
    pub fn of_stdin() -> Self {
        let Some(mut file) = stdin_file() else { return StdinSource::Nothing };
        let Ok(meta) = file.metadata() else { return StdinSource::Nothing };
        let kind = meta.file_type();
        if kind.is_file() {
            return match file.stream_position() {
                Ok(start) => StdinSource::File { start },
                Err(_) => StdinSource::Stream,
            };
        }
        let null = std::fs::metadata("/dev/null").ok().map(|null| null.rdev());
        if kind.is_char_device() && Some(meta.rdev()) == null {
            return StdinSource::Nothing;
        }
        StdinSource::Stream
    }

    /// Whether there is anything to stream.
    pub fn streams(self) -> bool {
        self != StdinSource::Nothing
    }

    /// Sets a regular file's offset to `start + consumed`: where it would be had the command read its stdin from
    /// the file itself through a pipe. Nothing for other kinds.
    pub fn leave_offset(self, consumed: u64) {
        if let (StdinSource::File { start }, Some(mut file)) = (self, stdin_file()) {
            let _ = file.seek(SeekFrom::Start(start.saturating_add(consumed)));
        }
    }
}

/// One read of stdin: bytes (never empty), the end (EOF), or an error that ends it.
#[derive(Debug)]
pub enum Piece {
    Bytes(Vec<u8>),
    End,
    Failed(std::io::Error),
}

/// Starts the reader thread for `source` (not [`StdinSource::Nothing`]); it ends at EOF, on an error, or when the
/// receiver is gone (the next chunk cannot be handed on).
pub fn start_reader(source: StdinSource) -> mpsc::Receiver<Piece> {
    let (chunks, received) = mpsc::channel(READ_AHEAD);
    // No thread (it could not be made): the receiver sees the channel closed, which the sender treats as the end.
    let _ = std::thread::Builder::new().name("stdin".into()).spawn(move || read_all(source, &chunks));
    received
}

fn read_all(source: StdinSource, chunks: &mpsc::Sender<Piece>) {
    let Some(mut file) = stdin_file() else {
        let _ = chunks.blocking_send(Piece::End);
        return;
    };
    let mut at = match source {
        StdinSource::File { start } => Some(start),
        _ => None,
    };
    loop {
        let mut buffer = vec![0; CHUNK_BYTES];
        let read = match at {
            Some(offset) => file.read_at(&mut buffer, offset),
            None => file.read(&mut buffer),
        };
        let piece = match read {
            Ok(0) => Piece::End,
            Ok(n) => {
                buffer.truncate(n);
                at = at.map(|offset| offset + n as u64);
                Piece::Bytes(buffer)
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => Piece::Failed(err),
        };
        let last = !matches!(piece, Piece::Bytes(_));
        if chunks.blocking_send(piece).is_err() || last {
            return;
        }
    }
}
