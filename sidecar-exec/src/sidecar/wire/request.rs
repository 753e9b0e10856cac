//! The request body, built once and held against the server's body limit before anything is sent.

use protocol::ExecRequest;

/// `request` as JSON, or a clear error when it is larger than the 1 MiB every server accepts (the contract's
/// limit; a larger body would only come back as 413).
pub fn body(request: &ExecRequest) -> Result<Vec<u8>, RequestError> {
    let body = serde_json::to_vec(request).map_err(RequestError::Encode)?;
    if body.len() <= protocol::MAX_BODY_BYTES {
        return Ok(body);
    }
    let stdin = request.stdin_b64.as_ref().map_or(0, String::len);
    Err(RequestError::TooLarge { bytes: body.len(), stdin })
}

/// Why a request cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot encode the request: {0}")]
    Encode(serde_json::Error),
    /// `bytes` in all, over the body limit; `stdin` of them are stdin's base64.
    #[error(
        "the request would be {bytes} bytes, over the server's limit of {} (1 MiB): stdin takes {stdin} of them as \
         base64 (so at most 768 KiB of stdin fits), the command line, working directory and environment {}; write \
         large inputs to a file in the shared workspace and pass its path",
        protocol::MAX_BODY_BYTES,
        .bytes - .stdin
    )]
    TooLarge { bytes: usize, stdin: usize },
}
