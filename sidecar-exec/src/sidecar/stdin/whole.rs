//! stdin as sidecar-exec's request carries it: read whole before the request is sent, base64 in `stdin_b64`, at most
//! [`MAX_STDIN_BYTES`]; which stdin is forwarded is [`crate::sidecar::stdin::policy`]'s policy.

use std::io::Read;

use crate::sidecar::stdin::policy::{self as stdin, StdinKind};

/// The most stdin one request carries: 768 KiB, 3/4 of the 1 MiB body limit. stdin travels as base64
/// (`stdin_b64`), 4 bytes for every 3 whatever they are; as JSON text a newline would cost 2 bytes and a control
/// byte 6, so the limit would depend on the content. The rest of the request (argv, cwd, env) must fit beside it:
/// [`crate::sidecar::wire::request::body`] checks the whole before sending.
pub const MAX_STDIN_BYTES: usize = protocol::MAX_BODY_BYTES / 4 * 3;

/// What the client does with its stdin.
#[derive(Debug)]
pub struct Stdin {
    /// The bytes to forward, when stdin is forwarded.
    pub bytes: Option<Vec<u8>>,
    /// stdin is a pipe (or socket) that is not forwarded: if it holds data ([`stdin::has_data_now`]), that is worth
    /// one hint ([`stdin::unread_hint`]).
    pub unread_pipe: bool,
}

/// Reads stdin when it is to be forwarded ([`stdin::forwarded`]), at most [`MAX_STDIN_BYTES`].
pub fn read(forward_pipe: bool) -> Result<Stdin, StdinError> {
    let kind = stdin::kind();
    if !stdin::forwarded(kind, forward_pipe) {
        return Ok(Stdin { bytes: None, unread_pipe: kind == StdinKind::Pipe });
    }
    let stdin = std::io::stdin();
    let mut bytes = Vec::new();
    stdin.lock().take(MAX_STDIN_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(StdinError::Unreadable)?;
    if bytes.len() > MAX_STDIN_BYTES {
        return Err(StdinError::TooLarge);
    }
    Ok(Stdin { bytes: Some(bytes), unread_pipe: false })
}

/// Why stdin cannot be forwarded.
#[derive(Debug, thiserror::Error)]
pub enum StdinError {
    #[error("cannot read stdin: {0}")]
    Unreadable(std::io::Error),
    /// More than [`MAX_STDIN_BYTES`].
    #[error(
        "stdin is larger than 768 KiB ({} bytes), more than one request can carry (the body limit is 1 MiB and stdin \
         travels as base64): write it to a file in the shared workspace and pass the file's path instead",
        MAX_STDIN_BYTES
    )]
    TooLarge,
}
