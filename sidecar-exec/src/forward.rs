//! Forwarding one command: blocking (`POST /exec`) or streaming (`POST /exec/stream`), and the exit code it ends
//! with.

use std::io::Write;
use std::time::Duration;

use futures_util::StreamExt;
use protocol::{ExecReply, Frame};

use crate::config::{CallSettings, Target};

/// How the client ends: the code to exit with, and a message for stderr (none when the command's own output
/// says it all).
#[derive(Debug)]
pub struct Ending {
    pub code: i32,
    pub message: Option<String>,
}

impl Ending {
    fn code(code: i32) -> Self {
        Ending { code, message: None }
    }

    pub fn fail(message: impl Into<String>) -> Self {
        Ending { code: 1, message: Some(message.into()) }
    }
}

/// Exit code for stdout closed early (`| head -1`), as a native command killed by SIGPIPE reports.
pub const EXIT_BROKEN_PIPE: i32 = 128 + 13;
/// How long a stream may stay silent; the server sends a keep-alive every 15 s by default.
pub const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exit code for a finished command: its own; 124 for a timeout (ours: `timed_out`; the contract's: -1 with
/// "timed out"); 255 when it never started.
pub fn exit_code_for(code: i32, timed_out: bool, error: Option<&str>) -> i32 {
    if timed_out || (code == protocol::EXIT_NOT_STARTED && error.is_some_and(|e| e.contains("timed out"))) {
        protocol::EXIT_TIMED_OUT
    } else if code == protocol::EXIT_NOT_STARTED {
        255
    } else {
        code
    }
}

pub fn http_client(stream: bool) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .user_agent(concat!("sidecar-exec/", env!("CARGO_PKG_VERSION")));
    if stream {
        builder = builder.read_timeout(STREAM_READ_TIMEOUT);
    }
    builder.build().map_err(|err| format!("cannot set up the HTTP client: {err}"))
}

/// Sends `body` (the request, already checked against the body limit) and reproduces what comes back.
pub async fn forward(target: &Target, settings: &CallSettings, body: Vec<u8>) -> Ending {
    let client = match http_client(settings.stream) {
        Ok(client) => client,
        Err(message) => return Ending::fail(message),
    };
    let path = if settings.stream { "/exec/stream" } else { "/exec" };
    let mut call = client.post(format!("{}{path}", target.url)).header("content-type", "application/json").body(body);
    if let Some(token) = &target.token {
        call = call.bearer_auth(&token.value);
    }
    if !settings.stream {
        call = call.timeout(settings.blocking_deadline());
    }
    let response = match call.send().await {
        Ok(response) => response,
        Err(err) => return Ending::fail(transport_error(target, &err)),
    };
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Ending::fail(http_error(target, status, &body));
    }
    if settings.stream {
        stream_reply(target, response).await
    } else {
        blocking_reply(target, settings, response).await
    }
}

async fn blocking_reply(target: &Target, settings: &CallSettings, response: reqwest::Response) -> Ending {
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(err) if err.is_timeout() => {
            return Ending::fail(format!(
                "no reply from sidecar at {} within {} s (SIDECAR_TIMEOUT + 30 s)",
                target.url,
                settings.blocking_deadline().as_secs()
            ))
        }
        Err(err) => return Ending::fail(transport_error(target, &err)),
    };
    let reply: ExecReply = match serde_json::from_slice(&body) {
        Ok(reply) => reply,
        Err(err) => return Ending::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url)),
    };
    let (Ok(stdout), Ok(stderr)) = (reply.stdout_bytes(), reply.stderr_bytes()) else {
        return Ending::fail(format!("sidecar at {} sent invalid base64 output", target.url));
    };
    if write_all(&mut std::io::stdout().lock(), &stdout).is_err() {
        return Ending::code(EXIT_BROKEN_PIPE);
    }
    let _ = write_all(&mut std::io::stderr().lock(), &stderr);
    let mut notes = Vec::new();
    if reply.output_truncated {
        notes.push("stdout was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    if reply.stderr_truncated {
        notes.push("stderr was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    notes.extend(reply.error.clone());
    let code = exit_code_for(reply.exit_code, reply.timed_out, reply.error.as_deref());
    Ending { code, message: (!notes.is_empty()).then(|| notes.join("; ")) }
}

async fn stream_reply(target: &Target, response: reqwest::Response) -> Ending {
    let mut body = response.bytes_stream();
    let mut parser = protocol::sse::SseParser::new();
    let mut events = Vec::new();
    let mut stdout = std::io::stdout().lock();
    let mut bytes = Vec::with_capacity(64 * 1024);
    let mut last_error: Option<String> = None;
    while let Some(piece) = body.next().await {
        let piece = match piece {
            Ok(piece) => piece,
            Err(err) if err.is_timeout() => {
                return Ending::fail(format!(
                    "sidecar at {} sent nothing for {} s, not even a keep-alive: the connection is lost",
                    target.url,
                    STREAM_READ_TIMEOUT.as_secs()
                ))
            }
            Err(err) => return Ending::fail(format!("stream from sidecar at {} broke: {err}", target.url)),
        };
        if let Err(err) = parser.feed(&piece, &mut events) {
            return Ending::fail(format!(
                "sidecar at {} sent {err} in its event stream, far more than any exec-server event (under 1 MiB): \
                 giving up on it",
                target.url
            ));
        }
        for data in events.drain(..) {
            let frame = match Frame::from_json(&data) {
                Ok(Some(frame)) => frame,
                // A frame type from a newer server: not ours to handle.
                Ok(None) => continue,
                Err(err) => return Ending::fail(format!("sidecar at {} sent an unreadable frame ({err})", target.url)),
            };
            bytes.clear();
            match frame {
                Frame::Stdout(chunk) | Frame::Stderr(chunk) if chunk.write_bytes(&mut bytes).is_err() => {
                    return Ending::fail(format!("sidecar at {} sent invalid base64 output", target.url))
                }
                // `bytes` now holds the chunk's exact bytes (decoded by the guard above).
                Frame::Stdout(_) => {
                    if write_all(&mut stdout, &bytes).is_err() {
                        return Ending::code(EXIT_BROKEN_PIPE);
                    }
                }
                Frame::Stderr(_) => {
                    let _ = stdout.flush();
                    let _ = write_all(&mut std::io::stderr().lock(), &bytes);
                }
                Frame::Error { data } => {
                    let _ = stdout.flush();
                    eprintln!("sidecar-exec: {data}");
                    last_error = Some(data);
                }
                Frame::Exit { data, timed_out, .. } => {
                    return Ending::code(exit_code_for(data, timed_out, last_error.as_deref()));
                }
            }
        }
    }
    Ending::fail(format!(
        "stream ended without an exit frame: the sidecar at {} closed the connection (was it stopped or restarted?)",
        target.url
    ))
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}

pub fn transport_error(target: &Target, err: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut cause = String::new();
    let mut source = err.source();
    while let Some(inner) = source {
        cause = inner.to_string();
        source = inner.source();
    }
    if err.is_connect() {
        format!(
            "failed to connect to sidecar at {}: {cause} (is the {} builder running and reachable?)",
            target.url, target.runtime
        )
    } else if err.is_timeout() {
        format!("request to sidecar at {} timed out: {cause}", target.url)
    } else if cause.is_empty() {
        format!("request to sidecar at {} failed: {err}", target.url)
    } else {
        format!("request to sidecar at {} failed: {err}: {cause}", target.url)
    }
}

fn http_error(target: &Target, status: reqwest::StatusCode, body: &str) -> String {
    let detail = serde_json::from_str::<protocol::ErrorBody>(body)
        .map(|body| body.error)
        .unwrap_or_else(|_| body.trim().chars().take(300).collect());
    let hint = match status.as_u16() {
        401 => " (set SIDECAR_TOKEN or SIDECAR_TOKEN_FILE, or a token in BUILD_SIDECARS, to the server's token)",
        _ => "",
    };
    format!("sidecar at {} answered {status}: {detail}{hint}", target.url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_mapping() {
        assert_eq!(exit_code_for(0, false, None), 0);
        assert_eq!(exit_code_for(137, false, None), 137);
        assert_eq!(exit_code_for(124, true, Some("command timed out after 1s")), 124);
        assert_eq!(exit_code_for(-1, false, Some("command timed out after 1s")), 124);
        assert_eq!(exit_code_for(-1, false, Some("failed to start command: x")), 255);
        assert_eq!(exit_code_for(-1, false, None), 255);
    }
}
