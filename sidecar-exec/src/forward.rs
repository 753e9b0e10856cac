//! Forwarding one command: blocking (`POST /exec`) or streaming (`POST /exec/stream`), and how the client ends.

use std::io::Write;

use futures_util::StreamExt;
use protocol::reply_view::OutputError;
use protocol::Frame;

use crate::body::{mib, read_reply, small_text, BodyError, MAX_REPLY_BYTES};
use crate::config::{CallSettings, Target};
pub use crate::exit_code::ClientExit;
use crate::exit_code::{exit_code_for, ImpossibleCode, EXIT_BROKEN_PIPE};
use crate::http::{http_client, location, refusal, transport_error, STREAM_READ_TIMEOUT};
use crate::shown::shown;

impl ClientExit {
    /// The ending for a finished command's reported code, with the notes already gathered (none: no message).
    fn finished(target: &Target, code: i32, timed_out: bool, error: Option<&str>, mut notes: Vec<String>) -> Self {
        let code = match exit_code_for(code, timed_out, error) {
            Ok(code) => code,
            Err(impossible) => {
                notes.push(impossible.message(&target.url));
                ImpossibleCode::EXIT
            }
        };
        ClientExit { code, message: (!notes.is_empty()).then(|| notes.join("; ")) }
    }
}

/// Sends `body` (the request, already checked against the body limit) and reproduces what comes back.
pub async fn forward(target: &Target, settings: &CallSettings, body: Vec<u8>) -> ClientExit {
    let client = match http_client(settings.stream, target.socket.as_deref()) {
        Ok(client) => client,
        Err(message) => return ClientExit::fail(message),
    };
    let path = if settings.stream { "/exec/stream" } else { "/exec" };
    let mut call = client.post(target.endpoint(path)).header("content-type", "application/json").body(body);
    if let Some(token) = &target.token {
        call = call.bearer_auth(&token.value);
    }
    for (header, value) in &settings.trace_headers {
        // A value no header can hold is left out rather than failing the call.
        if let Ok(value) = reqwest::header::HeaderValue::from_str(value) {
            call = call.header(*header, value);
        }
    }
    if !settings.stream {
        call = call.timeout(settings.blocking_deadline());
    }
    let response = match call.send().await {
        Ok(response) => response,
        Err(err) => return ClientExit::fail(transport_error(target, &err)),
    };
    let status = response.status();
    if !status.is_success() {
        let location = location(&response);
        let body = small_text(response).await;
        return ClientExit::fail(refusal(target, Some(settings), status, location.as_deref(), &body));
    }
    if settings.stream {
        stream_reply(target, response).await
    } else {
        blocking_reply(target, settings, response).await
    }
}

async fn blocking_reply(target: &Target, settings: &CallSettings, response: reqwest::Response) -> ClientExit {
    // Large pieces: stdout's own buffer is line-buffered, and a reply is often thousands of lines.
    let mut stdout = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let body = match read_reply(response, MAX_REPLY_BYTES, &mut stdout).await {
        Ok(body) => body,
        Err(BodyError::TooLarge { limit }) => {
            return ClientExit::fail(format!(
                "sidecar at {} sent a reply larger than {}, more than exec-server sends with its default \
                 --max-output: giving up on it (set SIDECAR_STREAM=1 for output this large)",
                target.url,
                mib(limit)
            ))
        }
        Err(BodyError::Transport(err)) if err.is_timeout() => {
            return ClientExit::fail(format!(
                "no reply from sidecar at {} within {} s (SIDECAR_TIMEOUT + 30 s)",
                target.url,
                settings.blocking_deadline().as_secs()
            ))
        }
        Err(BodyError::Transport(err)) => return ClientExit::fail(transport_error(target, &err)),
        Err(BodyError::Unreadable(err)) => {
            return ClientExit::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url))
        }
        Err(BodyError::Write(_)) => return ClientExit::code(EXIT_BROKEN_PIPE),
    };
    // stdout's text was decoded as it arrived; the rest is read in place (see protocol::reply_view).
    let reply = match body.view() {
        Ok(reply) => reply,
        Err(err) => return ClientExit::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url)),
    };
    let invalid = || ClientExit::fail(format!("sidecar at {} sent invalid output (bad escape or base64)", target.url));
    match reply.write_stdout(&mut stdout).and_then(|()| stdout.flush().map_err(OutputError::Write)) {
        Ok(()) => {}
        Err(OutputError::Invalid) => return invalid(),
        Err(OutputError::Write(_)) => return ClientExit::code(EXIT_BROKEN_PIPE),
    }
    let mut stderr = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr().lock());
    if let Err(OutputError::Invalid) = reply.write_stderr(&mut stderr) {
        return invalid();
    }
    let _ = stderr.flush();
    let mut notes = Vec::new();
    if reply.output_truncated {
        notes.push("stdout was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    if reply.stderr_truncated {
        notes.push("stderr was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    notes.extend(reply.error.as_deref().map(shown));
    ClientExit::finished(target, reply.exit_code, reply.timed_out, reply.error.as_deref(), notes)
}

async fn stream_reply(target: &Target, response: reqwest::Response) -> ClientExit {
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
                return ClientExit::fail(format!(
                    "sidecar at {} sent nothing for {} s, not even a keep-alive: the connection is lost",
                    target.url,
                    STREAM_READ_TIMEOUT.as_secs()
                ))
            }
            Err(err) => return ClientExit::fail(format!("stream from sidecar at {} broke: {err}", target.url)),
        };
        if let Err(err) = parser.feed(&piece, &mut events) {
            return ClientExit::fail(format!(
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
                Err(err) => {
                    return ClientExit::fail(format!("sidecar at {} sent an unreadable frame ({err})", target.url))
                }
            };
            bytes.clear();
            match frame {
                Frame::Stdout(chunk) | Frame::Stderr(chunk) if chunk.write_bytes(&mut bytes).is_err() => {
                    return ClientExit::fail(format!("sidecar at {} sent invalid base64 output", target.url))
                }
                // `bytes` now holds the chunk's exact bytes (decoded by the guard above).
                Frame::Stdout(_) => {
                    if write_all(&mut stdout, &bytes).is_err() {
                        return ClientExit::code(EXIT_BROKEN_PIPE);
                    }
                }
                Frame::Stderr(_) => {
                    let _ = stdout.flush();
                    let _ = write_all(&mut std::io::stderr().lock(), &bytes);
                }
                Frame::Error { data } => {
                    let _ = stdout.flush();
                    eprintln!("sidecar-exec: {}", shown(&data));
                    last_error = Some(data);
                }
                Frame::Exit { data, timed_out, .. } => {
                    return ClientExit::finished(target, data, timed_out, last_error.as_deref(), Vec::new());
                }
            }
        }
    }
    ClientExit::fail(format!(
        "stream ended without an exit frame: the sidecar at {} closed the connection (was it stopped or restarted?)",
        target.url
    ))
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}
