//! Forwarding one command: blocking (`POST /exec`) or streaming (`POST /exec/stream`), resumed when the connection is
//! lost ([`crate::resume`]), and how the client ends.

use std::io::Write;

use protocol::ExecReply;

use crate::body::{mib, read_bounded, small_text, BodyError, MAX_REPLY_BYTES};
use crate::config::{CallSettings, Target};
pub use crate::exit_code::ClientExit;
use crate::exit_code::EXIT_BROKEN_PIPE;
use crate::http::{authorized, http_client, location, refusal, transport_error};
use crate::output::Output;
use crate::resume::{self, Follow, Run, Step};
use crate::shown::shown;
use crate::stream::Errors;

/// Sends `body` (the request, already checked against the body limit) and reproduces what comes back. `run` is the
/// run the body starts (named or not; see [`crate::resume`]): it says afterwards whether the client must cancel it.
pub async fn forward(target: &Target, settings: &CallSettings, mut body: Vec<u8>, run: &mut Run) -> ClientExit {
    let client = match http_client(settings.stream, target.socket.as_deref()) {
        Ok(client) => client,
        Err(message) => return ClientExit::fail(message),
    };
    if settings.stream {
        let how =
            Follow { target, client: &client, settings: Some(settings), body: Some(&body), verbose: settings.verbose };
        let mut errors = Errors { last: None, print: true };
        return resume::follow(&how, run, &mut Output::write(), &mut errors, Step::Post, None).await;
    }
    // Kept only for a run that may be resumed (its POST may have to be sent again).
    let sent = if run.resumable() { body.clone() } else { std::mem::take(&mut body) };
    let call = authorized(client.post(target.endpoint("/exec")), target, Some(settings))
        .header("content-type", "application/json")
        .body(sent)
        .timeout(settings.blocking_deadline());
    run.live = true;
    let lost = match call.send().await {
        Ok(response) if !response.status().is_success() => {
            let (status, location) = (response.status(), location(&response));
            let body = small_text(response).await;
            return ClientExit::fail(refusal(target, Some(settings), status, location.as_deref(), &body));
        }
        Ok(response) => match blocking_reply(target, settings, response).await {
            Ok(exit) => {
                run.live = false;
                return exit;
            }
            Err(lost) => lost,
        },
        // Never connected (nothing started), or the command's own deadline passed: nothing to resume.
        Err(err) if err.is_connect() || err.is_timeout() => return ClientExit::fail(transport_error(target, &err)),
        Err(err) => transport_error(target, &err),
    };
    if !run.resumable() {
        return ClientExit::fail(lost);
    }
    // The reply was lost on the way: follow the run's stream from the start, keep it, print it as the reply would.
    let client = match http_client(true, target.socket.as_deref()) {
        Ok(client) => client,
        Err(message) => return ClientExit::fail(message),
    };
    let how =
        Follow { target, client: &client, settings: Some(settings), body: Some(&body), verbose: settings.verbose };
    let mut errors = Errors { last: None, print: false };
    resume::follow(&how, run, &mut Output::collect(), &mut errors, Step::Reattach, Some(lost)).await
}

/// The reply of `POST /exec`, reproduced; `Err` with the message when the connection was lost while reading it.
async fn blocking_reply(
    target: &Target,
    settings: &CallSettings,
    response: reqwest::Response,
) -> Result<ClientExit, String> {
    let body = match read_bounded(response, MAX_REPLY_BYTES).await {
        Ok(body) => body,
        Err(BodyError::TooLarge { limit }) => {
            return Ok(ClientExit::fail(format!(
                "sidecar at {} sent a reply larger than {}, more than exec-server sends with its default \
                 --max-output: giving up on it (set SIDECAR_STREAM=1 for output this large)",
                target.url,
                mib(limit)
            )))
        }
        Err(BodyError::Transport(err)) if err.is_timeout() => {
            return Ok(ClientExit::fail(format!(
                "no reply from sidecar at {} within {} s (SIDECAR_TIMEOUT + 30 s)",
                target.url,
                settings.blocking_deadline().as_secs()
            )))
        }
        Err(BodyError::Transport(err)) => return Err(transport_error(target, &err)),
    };
    let reply: ExecReply = match serde_json::from_slice(&body) {
        Ok(reply) => reply,
        Err(err) => return Ok(ClientExit::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url))),
    };
    drop(body);
    let (Ok(stdout), Ok(stderr)) = (reply.stdout_bytes(), reply.stderr_bytes()) else {
        return Ok(ClientExit::fail(format!("sidecar at {} sent invalid base64 output", target.url)));
    };
    if write_all(&mut std::io::stdout().lock(), &stdout).is_err() {
        return Ok(ClientExit::code(EXIT_BROKEN_PIPE));
    }
    let _ = write_all(&mut std::io::stderr().lock(), &stderr);
    let mut notes = Vec::new();
    if reply.output_truncated {
        notes.push("stdout was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    if reply.stderr_truncated {
        notes.push("stderr was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    notes.extend(reply.error.as_deref().map(shown));
    Ok(ClientExit::finished(target, reply.exit_code, reply.timed_out, reply.error.as_deref(), notes))
}

fn write_all(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes)?;
    out.flush()
}
