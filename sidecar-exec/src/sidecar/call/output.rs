//! Where a command's stream frames go, and how far each stream has got: the bookkeeping that makes a resumed stream
//! byte-for-byte the stream of a run without a break.
//!
//! Each stream's position is counted in the server's offsets: every byte a frame stands for (payload and implied
//! newline), plus the bytes a `dropped` frame stands for; never the client's own dropped marker. A frame that starts
//! below the position (the server replays from where it was asked, and a frame may straddle it) is trimmed to what
//! is new; a frame that starts above it would leave a hole, which is an error, never silently skipped.

use std::io::Write;

use protocol::{Chunk, StreamKind};

/// What a [`RunOutput`] does with the bytes.
#[derive(Debug)]
enum Delivery {
    /// Streaming mode: write each frame's bytes to our stdout / stderr as they come.
    Write,
    /// Blocking mode: keep them, printed at the end (stdout, then stderr) as a blocking reply is.
    Collect { stdout: Vec<u8>, stderr: Vec<u8> },
}

/// Why output cannot go on.
#[derive(Debug, PartialEq, Eq)]
pub enum RunOutputError {
    /// Our stdout is closed (`| head -1`): end with [`crate::exit::EXIT_BROKEN_PIPE`], quietly.
    BrokenPipe,
    /// A frame's `b64` is not base64.
    BadBase64,
    /// A frame starts after the position: the bytes in between would be missing.
    Gap { stream: StreamKind, at: u64, expected: u64 },
    /// Blocking mode held more than the client's reply bound.
    TooLarge,
    /// A frame that would end past the largest offset there is (a `dropped` frame of 2^64 − 1 bytes): no stream
    /// is that long, so it is refused like a gap, never trimmed away as if it were old.
    Overflow { stream: StreamKind, at: u64, len: u64 },
}

/// The output of one run and each stream's position.
#[derive(Debug)]
pub struct RunOutput {
    mode: Delivery,
    /// Bytes of stdout and of stderr received so far, in the server's offsets.
    position: [u64; 2],
    /// Whether any frame carried an offset: the server keeps this run and can resume it.
    offsets_seen: bool,
    /// Whether an output frame came without one: the server does not keep runs (or this one is not named).
    offsets_missing: bool,
    /// Frames whose bytes were all trimmed away, and trimmed bytes (for the resume figures).
    pub trimmed_bytes: u64,
    scratch: Vec<u8>,
}

/// The line printed where a stream's middle was not kept by the server.
pub fn dropped_marker(bytes: u64) -> String {
    format!("[… {bytes} bytes dropped …]\n")
}

fn index(stream: StreamKind) -> usize {
    match stream {
        StreamKind::Stdout => 0,
        StreamKind::Stderr => 1,
    }
}

impl RunOutput {
    /// Output written as it comes (streaming mode).
    pub fn write() -> Self {
        RunOutput::new(Delivery::Write)
    }

    /// Output kept until the end (blocking mode).
    pub fn collect() -> Self {
        RunOutput::new(Delivery::Collect { stdout: Vec::new(), stderr: Vec::new() })
    }

    /// Output kept until the end (blocking mode), after the first `stdout_written` bytes of stdout were already
    /// written (a blocking reply written as it arrived, then lost): they count as stdout's position, so the resumed
    /// stream brings only what follows them.
    pub fn collect_after(stdout_written: u64) -> Self {
        let mut output = RunOutput::collect();
        output.position[0] = stdout_written;
        output
    }

    fn new(mode: Delivery) -> Self {
        RunOutput {
            mode,
            position: [0, 0],
            offsets_seen: false,
            offsets_missing: false,
            trimmed_bytes: 0,
            scratch: Vec::with_capacity(64 * 1024),
        }
    }

    /// Where stdout and stderr have got, in the server's offsets: what a resume asks for.
    pub fn position(&self) -> (u64, u64) {
        (self.position[0], self.position[1])
    }

    /// What the frames so far say about the server: `Some(true)` when one carried an offset (it keeps this run and
    /// can resume it), `Some(false)` when output came without any (it ignores run ids), `None` before any output.
    pub fn resumable(&self) -> Option<bool> {
        if self.offsets_seen {
            Some(true)
        } else if self.offsets_missing {
            Some(false)
        } else {
            None
        }
    }

    /// One stdout/stderr frame: its new bytes written, the position advanced. A frame without an offset (an
    /// unnamed run, or a server that ignores run ids) continues where the stream is.
    pub fn chunk(&mut self, stream: StreamKind, chunk: &Chunk) -> Result<(), RunOutputError> {
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        let decoded = chunk.write_bytes(&mut bytes).map_err(|_| RunOutputError::BadBase64);
        let result = decoded.and_then(|()| {
            let position = self.position[index(stream)];
            let start = chunk.offset.unwrap_or(position);
            self.offsets_seen |= chunk.offset.is_some();
            self.offsets_missing |= chunk.offset.is_none();
            self.advance(stream, start, bytes.len() as u64, |this, skip| this.emit(stream, &bytes[skip..]))
        });
        self.scratch = bytes;
        result
    }

    /// A `dropped` frame: bytes `offset..offset + bytes` of `stream` are gone; the marker stands in for what of
    /// them is past the position.
    pub fn dropped(&mut self, stream: StreamKind, offset: u64, bytes: u64) -> Result<(), RunOutputError> {
        self.offsets_seen = true;
        self.advance(stream, offset, bytes, |this, skip| {
            this.emit(stream, dropped_marker(bytes - skip as u64).as_bytes())
        })
    }

    /// Moves `stream` over `len` bytes starting at `start`, calling `write` with how many of them are old (already
    /// written) when some are new.
    fn advance(
        &mut self,
        stream: StreamKind,
        start: u64,
        len: u64,
        write: impl FnOnce(&mut Self, usize) -> Result<(), RunOutputError>,
    ) -> Result<(), RunOutputError> {
        let position = self.position[index(stream)];
        if start > position {
            return Err(RunOutputError::Gap { stream, at: start, expected: position });
        }
        let Some(end) = start.checked_add(len) else {
            return Err(RunOutputError::Overflow { stream, at: start, len });
        };
        if end <= position {
            self.trimmed_bytes += len;
            return Ok(());
        }
        let skip = position - start;
        self.trimmed_bytes += skip;
        write(self, usize::try_from(skip).unwrap_or(usize::MAX))?;
        self.position[index(stream)] = end;
        Ok(())
    }

    fn emit(&mut self, stream: StreamKind, bytes: &[u8]) -> Result<(), RunOutputError> {
        match (&mut self.mode, stream) {
            (Delivery::Write, StreamKind::Stdout) => {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(bytes).and_then(|()| stdout.flush()).map_err(|_| RunOutputError::BrokenPipe)
            }
            (Delivery::Write, StreamKind::Stderr) => {
                let _ = std::io::stdout().flush();
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(bytes).and_then(|()| stderr.flush());
                Ok(())
            }
            (Delivery::Collect { stdout, stderr }, stream) => {
                let held = if stream == StreamKind::Stdout { stdout } else { stderr };
                if held.len() + bytes.len() > crate::sidecar::wire::body::MAX_REPLY_BYTES {
                    return Err(RunOutputError::TooLarge);
                }
                held.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Whether the exit frame's totals (when it has them) are exactly where the streams got: nothing missing.
    pub fn complete(&self, stdout_total: Option<u64>, stderr_total: Option<u64>) -> Result<(), (StreamKind, u64, u64)> {
        for (stream, total) in [(StreamKind::Stdout, stdout_total), (StreamKind::Stderr, stderr_total)] {
            let got = self.position[index(stream)];
            if let Some(total) = total.filter(|&total| total != got) {
                return Err((stream, got, total));
            }
        }
        Ok(())
    }

    /// Blocking mode's end: what was kept, stdout then stderr, written. `Err` when stdout is closed.
    pub fn finish(&mut self) -> Result<(), RunOutputError> {
        if let Delivery::Collect { stdout, stderr } = &mut self.mode {
            let (stdout, stderr) = (std::mem::take(stdout), std::mem::take(stderr));
            let mut out = std::io::stdout().lock();
            out.write_all(&stdout).and_then(|()| out.flush()).map_err(|_| RunOutputError::BrokenPipe)?;
            let _ = std::io::stderr().lock().write_all(&stderr);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(data: &str, nl: bool, offset: Option<u64>) -> Chunk {
        Chunk { data: data.into(), nl, b64: None, offset }
    }

    fn held(output: &RunOutput) -> (String, String) {
        match &output.mode {
            Delivery::Collect { stdout, stderr } => {
                (String::from_utf8_lossy(stdout).into_owned(), String::from_utf8_lossy(stderr).into_owned())
            }
            Delivery::Write => unreachable!(),
        }
    }

    #[test]
    fn replayed_frames_are_trimmed_to_what_is_new() {
        let mut output = RunOutput::collect();
        output.chunk(StreamKind::Stdout, &chunk("one\ntwo", true, Some(0))).unwrap();
        output.chunk(StreamKind::Stderr, &chunk("warn", false, Some(0))).unwrap();
        assert_eq!(output.position(), (8, 4));
        // A resume from an offset that falls inside a frame, and a frame replayed whole.
        output.chunk(StreamKind::Stdout, &chunk("two\nthree", true, Some(4))).unwrap();
        output.chunk(StreamKind::Stderr, &chunk("warn", false, Some(0))).unwrap();
        output.chunk(StreamKind::Stderr, &chunk("ing", true, Some(4))).unwrap();
        assert_eq!(held(&output), ("one\ntwo\nthree\n".into(), "warning\n".into()));
        assert_eq!(output.position(), (14, 8));
        assert_eq!(output.trimmed_bytes, 4 + 4);
        assert_eq!(output.resumable(), Some(true));
        assert_eq!(output.complete(Some(14), Some(8)), Ok(()));
        assert_eq!(output.complete(Some(15), None), Err((StreamKind::Stdout, 14, 15)));
    }

    #[test]
    fn a_hole_is_an_error_and_frames_without_offsets_continue() {
        let mut output = RunOutput::collect();
        assert_eq!(output.resumable(), None);
        output.chunk(StreamKind::Stdout, &chunk("a", true, None)).unwrap();
        output.chunk(StreamKind::Stdout, &chunk("b", true, None)).unwrap();
        assert_eq!(output.resumable(), Some(false));
        assert_eq!(
            output.chunk(StreamKind::Stdout, &chunk("d", true, Some(6))),
            Err(RunOutputError::Gap { stream: StreamKind::Stdout, at: 6, expected: 4 })
        );
        let bad = Chunk { data: String::new(), nl: false, b64: Some("!!".into()), offset: Some(4) };
        assert_eq!(output.chunk(StreamKind::Stdout, &bad), Err(RunOutputError::BadBase64));
        assert_eq!(held(&output).0, "a\nb\n");
    }

    #[test]
    fn a_dropped_middle_prints_the_marker_once() {
        let mut output = RunOutput::collect();
        output.chunk(StreamKind::Stdout, &chunk("head", true, Some(0))).unwrap();
        output.dropped(StreamKind::Stdout, 5, 1000).unwrap();
        output.dropped(StreamKind::Stdout, 5, 1000).unwrap();
        output.chunk(StreamKind::Stdout, &chunk("tail", true, Some(1005))).unwrap();
        assert_eq!(held(&output).0, "head\n[… 1000 bytes dropped …]\ntail\n");
        assert_eq!(
            output.dropped(StreamKind::Stdout, 5, u64::MAX),
            Err(RunOutputError::Overflow { stream: StreamKind::Stdout, at: 5, len: u64::MAX })
        );
        assert_eq!(output.position(), (1010, 0));
        assert_eq!(output.complete(Some(1010), Some(0)), Ok(()));
    }
}
