//! Reading a reply body with a bound: what a broken or hostile server can make the client hold.

use crate::sidecar::wire::reply_reader::{ReadReply, ReplyReader};

/// The most of an `/exec` reply the client holds: 256 MiB. exec-server's `--max-output` (16 MiB by default) bounds
/// each of stdout and stderr as the reply carries them (JSON-escaped, plus base64 when not UTF-8), so a default
/// server's reply stays under 2 × 16 MiB plus a few hundred bytes of other fields, whatever the command prints
/// (older servers counted raw bytes, so up to 2 × 6 × 16 MiB = 192 MiB of output full of `\u0001`). What is held
/// is the reply less what was already written out: stdout, from a server that sends `x-b64-only`
/// ([`read_reply`]), goes out as it arrives and is not held, so only other servers' replies (or stderr above the
/// bound) meet it. Streaming (`SIDECAR_STREAM=1`) holds one event at a time.
pub const MAX_REPLY_BYTES: usize = 256 * 1024 * 1024;

/// The largest error or `/info` body read. Only its first KiB is ever shown.
pub const MAX_SMALL_BODY_BYTES: usize = 64 * 1024;

/// Why a body could not be read.
#[derive(Debug)]
pub enum BodyError {
    /// Larger than the bound (announced by Content-Length, or found while reading): nothing more is read.
    TooLarge {
        limit: usize,
    },
    Transport(reqwest::Error),
    /// stdout's text is not a valid JSON string (found while it arrived).
    Unreadable(serde_json::Error),
    /// Writing stdout's text as it arrived failed (a closed stdout: the client exits 141, whatever the error).
    Write,
}

/// The whole `/exec` reply, read as it arrives (stdout's text decoded on the way: see [`crate::sidecar::wire::reply_reader`]), or
/// [`BodyError::TooLarge`] as soon as what is held would exceed `limit`. When the server says its text is never
/// lossy ([`protocol::B64_ONLY_HEADER`]), stdout's text goes to `stdout` as it is decoded instead of being held,
/// up to where a cut stdout's head ends ([`protocol::OUTPUT_HEAD_HEADER`]). `written` counts what went to `stdout`:
/// always the command's first bytes, so that a resume after a lost reply goes on from there.
pub async fn read_reply(
    mut response: reqwest::Response,
    limit: usize,
    stdout: &mut impl std::io::Write,
    written: &mut u64,
    received: &mut u64,
) -> Result<ReadReply, BodyError> {
    if response.content_length().unwrap_or(0) > limit as u64 {
        return Err(BodyError::TooLarge { limit });
    }
    let headers = response.headers();
    let write_as_it_arrives = headers.contains_key(protocol::B64_ONLY_HEADER);
    let mut reader = ReplyReader::new(write_as_it_arrives);
    if let Some(head) = headers.get(protocol::OUTPUT_HEAD_HEADER) {
        // Unreadable: write nothing as it arrives rather than risk writing past the cut.
        reader = reader.write_at_most(head.to_str().ok().and_then(|head| head.parse().ok()).unwrap_or(0));
    }
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        *received += chunk.len() as u64;
        // Decoded text is never longer than its JSON, so this bounds what is held.
        if reader.held() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        reader.feed(&chunk).map_err(BodyError::Unreadable)?;
        if write_as_it_arrives {
            let result = reader.write_output(stdout);
            *written = reader.written();
            result.map_err(|_| BodyError::Write)?;
        }
    }
    Ok(reader.finish())
}

/// The whole body (the run list's), or [`BodyError::TooLarge`] as soon as it is known to exceed `limit`.
pub async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let announced = response.content_length().unwrap_or(0);
    if announced > limit as u64 {
        return Err(BodyError::TooLarge { limit });
    }
    // Trust a Content-Length only as far as the bound for the initial allocation.
    let mut body = Vec::with_capacity(announced as usize);
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A small body (an error's, `/info`'s) as text, cut at [`MAX_SMALL_BODY_BYTES`] instead of refused: the start of a
/// long error is still worth showing.
pub async fn small_text(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_SMALL_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_SMALL_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// `limit` bytes as a person reads them ("256 MiB").
pub fn mib(limit: usize) -> String {
    format!("{} MiB", limit / (1024 * 1024))
}
