//! Stream frames (`data: <json>` events of `/exec/stream`) and the encoder that batches pipe bytes into them.
//!
//! A stdout/stderr frame holds one or more complete lines joined by `\n`, the final newline implied, so a client that
//! prints each frame's `data` plus a newline (the contract's client) reproduces line output exactly. A frame with
//! `"nl": false` holds bytes not followed by a newline: a long line cut for size, a prompt that waited, or the
//! unterminated tail at end of output. Bytes that are not valid UTF-8 travel exactly in `b64` beside lossy `data`.
//!
//! Three jobs, one file each: this one holds the frame types (and their serde, which writes them); `read` is the
//! fast reader of one event ([`Frame::from_json`]) and its own serde machinery; `batch` is the server's
//! [`FrameEncoder`], which batches a pipe's bytes into events.

use serde::{Deserialize, Serialize};

mod batch;
mod read;

pub use batch::FrameEncoder;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    Stdout,
    Stderr,
}

/// One event of `/exec/stream`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Frame {
    Stdout(Chunk),
    Stderr(Chunk),
    /// A message about the command (start failure, timeout); never command output.
    Error {
        data: String,
        /// Extension: for a command that never started, why (as in the `/exec` reply).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_error: Option<crate::StartErrorKind>,
    },
    /// Named runs only (docs/exec-server.md, "Runs"): bytes `offset..offset + bytes` of `stream` are not kept (the
    /// middle of a run beyond the server's per-run cap). The next frame of that stream starts at `offset + bytes`; a
    /// client prints `[… K bytes dropped …]` and a newline in their place.
    Dropped {
        stream: StreamKind,
        offset: u64,
        bytes: u64,
    },
    /// Always the last frame: the exit code, as in the `/exec` reply.
    Exit {
        data: i32,
        #[serde(default)]
        timed_out: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        #[serde(default)]
        duration_ms: u64,
        /// Named runs only: stdout's total length, dropped bytes included, so a client can check it has it all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdout_bytes: Option<u64>,
        /// Named runs only: stderr's total length, dropped bytes included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stderr_bytes: Option<u64>,
        /// Named runs only: why the run was stopped, when something stopped it (absent when it ended by itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped_by: Option<crate::StoppedBy>,
        /// Runs with streamed stdin only (docs/exec-server.md, "Streamed stdin"): the bytes the command took from its
        /// stdin pipe (written into it, less what was still unread when the command ended).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdin_consumed: Option<u64>,
    },
}

/// The payload of a stdout/stderr frame.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunk {
    pub data: String,
    /// `false` when the payload is not followed by a newline. Absent means `true` (the contract's one-line frames).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub nl: bool,
    /// The exact payload bytes, base64, when they are not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b64: Option<String>,
    /// Named runs only: the offset in its stream of the first byte this frame stands for (the implied
    /// newline counts as a byte). Absent in unnamed runs' frames, which stay the contract's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

impl Chunk {
    /// Appends the exact bytes this chunk stands for (payload plus the implied newline) to `out`.
    pub fn write_bytes(&self, out: &mut Vec<u8>) -> Result<(), crate::text::InvalidBase64> {
        match &self.b64 {
            Some(b64) => crate::text::append_from_base64(out, b64.as_bytes())?,
            None => out.extend_from_slice(self.data.as_bytes()),
        }
        if self.nl {
            out.push(b'\n');
        }
        Ok(())
    }
}

impl StreamKind {
    /// The stream's name on the wire: `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Stdout => "stdout",
            StreamKind::Stderr => "stderr",
        }
    }
}

impl Frame {
    /// This frame as one SSE event: `data: <json>` and a blank line.
    pub fn to_event(&self) -> Vec<u8> {
        let mut out = b"data: ".to_vec();
        // Serializing these types cannot fail: no maps with non-string keys, no failing Serialize impls.
        out.extend(serde_json::to_vec(self).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
        out
    }
}

#[cfg(test)]
mod tests;
