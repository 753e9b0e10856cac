//! The request body, built once and held against the server's body limit before anything is sent.

use protocol::ExecRequest;

use crate::config_error::ConfigError;

/// `request` as JSON, or a clear error when it is larger than the 1 MiB every server accepts (the contract's
/// limit; a larger body would only come back as 413).
pub fn body(request: &ExecRequest) -> Result<Vec<u8>, ConfigError> {
    let body = serde_json::to_vec(request).map_err(|err| ConfigError(format!("cannot encode the request: {err}")))?;
    if body.len() <= protocol::MAX_BODY_BYTES {
        return Ok(body);
    }
    let stdin = request.stdin_b64.as_ref().map_or(0, String::len);
    Err(ConfigError(format!(
        "the request would be {} bytes, over the server's limit of {} (1 MiB): stdin takes {stdin} of them as base64 \
         (so at most 768 KiB of stdin fits), the command line, working directory and environment {}; write large \
         inputs to a file in the shared workspace and pass its path",
        body.len(),
        protocol::MAX_BODY_BYTES,
        body.len() - stdin
    )))
}
