//! Forwarding one command: blocking (`POST /exec`) or streaming (`POST /exec/stream`), resumed when the connection is
//! lost ([`crate::sidecar::resume`]), and how the client ends.

use std::io::Write;

use crate::sidecar::reply_reader::ReplyWriteError;

pub use crate::exit::ClientExit;
use crate::exit::EXIT_BROKEN_PIPE;
use crate::sidecar::body::{mib, read_reply, small_text, BodyError, MAX_REPLY_BYTES};
use crate::sidecar::http::{authorized, http_client, location, refusal, transport_error};
use crate::sidecar::output::RunOutput;
use crate::sidecar::reported_code;
use crate::sidecar::resume::{self, Follow, NextRequest, OwnedRun};
use crate::sidecar::settings::CallSettings;
use crate::sidecar::sidecars::Target;
use crate::sidecar::stream::ErrorFrames;
use crate::terminal_safe::terminal_safe;

/// Sends `body` (the request, already checked against the body limit) and reproduces what comes back. `run` is the
/// run the body starts (named or not; see [`crate::sidecar::resume`]): it says afterwards whether the client must cancel it.
pub async fn forward(target: &Target, settings: &CallSettings, mut body: Vec<u8>, run: &mut OwnedRun) -> ClientExit {
    let client = match http_client(settings.stream, target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    if settings.stream {
        let plan =
            Follow { target, client: &client, settings: Some(settings), body: Some(&body), verbose: settings.verbose };
        let mut errors = ErrorFrames { last: None, print: true };
        return resume::follow(&plan, run, &mut RunOutput::write(), &mut errors, NextRequest::Post, None).await;
    }
    // Kept only for a run that may be resumed (its POST may have to be sent again).
    let sent = if run.resumable() { body.clone() } else { std::mem::take(&mut body) };
    let call = authorized(client.post(target.endpoint("/exec")), target, Some(settings))
        .header("content-type", "application/json")
        .body(sent)
        .timeout(settings.blocking_deadline());
    run.live = true;
    let (lost, stdout_written) = match call.send().await {
        Ok(response) if !response.status().is_success() => {
            let (status, location) = (response.status(), location(&response));
            let body = small_text(response).await;
            return ClientExit::fail(refusal(target, Some(settings), status, location.as_deref(), &body));
        }
        Ok(response) => {
            // Only a server that said it keeps the run is asked to forget it (see `OwnedRun::should_forget`).
            let kept = response.headers().contains_key(protocol::RUN_KEPT_HEADER);
            let mut ended_with = None;
            match blocking_reply(target, settings, response, &mut ended_with).await {
                Ok(exit) => {
                    run.live = false;
                    if kept {
                        run.kept();
                        run.ended_with = ended_with;
                    }
                    return exit;
                }
                Err(lost) => lost,
            }
        }
        // Never connected (nothing started), or the command's own deadline passed: nothing to resume.
        Err(err) if err.is_connect() || err.is_timeout() => return ClientExit::fail(transport_error(target, &err)),
        Err(err) => (transport_error(target, &err), 0),
    };
    if !run.resumable() {
        return ClientExit::fail(lost);
    }
    // The reply was lost on the way: follow the run's stream from what was already written of stdout (the
    // command's first bytes, see `body::read_reply`), keep it, print it as the reply would.
    let client = match http_client(true, target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    let plan =
        Follow { target, client: &client, settings: Some(settings), body: Some(&body), verbose: settings.verbose };
    let mut errors = ErrorFrames { last: None, print: false };
    let mut output = RunOutput::collect_after(stdout_written);
    resume::follow(&plan, run, &mut output, &mut errors, NextRequest::Reattach, Some(lost)).await
}

/// The reply of `POST /exec`, reproduced; `written_all` gets the reply's size once all of it was written (it stands
/// for the output's: escaped JSON is at least as large; see [`OwnedRun::should_forget`]). `Err` when the connection was
/// lost while reading it: why, and how many bytes of stdout were written meanwhile (the command's first ones: see
/// [`crate::sidecar::body::read_reply`]).
async fn blocking_reply(
    target: &Target,
    settings: &CallSettings,
    response: reqwest::Response,
    written_all: &mut Option<u64>,
) -> Result<ClientExit, (String, u64)> {
    // Large pieces: stdout's own buffer is line-buffered, and a reply is often thousands of lines.
    let mut stdout = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let (mut written, mut received) = (0, 0);
    let body = match read_reply(response, MAX_REPLY_BYTES, &mut stdout, &mut written, &mut received).await {
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
        Err(BodyError::Transport(err)) => {
            // What was written counts as written: the resume goes on after it.
            if stdout.flush().is_err() {
                return Ok(ClientExit::code(EXIT_BROKEN_PIPE));
            }
            return Err((transport_error(target, &err), written));
        }
        Err(BodyError::Unreadable(err)) => {
            return Ok(ClientExit::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url)))
        }
        Err(BodyError::Write(_)) => return Ok(ClientExit::code(EXIT_BROKEN_PIPE)),
    };
    // stdout's text was decoded as it arrived; the rest is read in place (see sidecar::reply_reader).
    let reply = match body.view() {
        Ok(reply) => reply,
        Err(err) => return Ok(ClientExit::fail(format!("sidecar at {} sent an unreadable reply: {err}", target.url))),
    };
    let invalid = || ClientExit::fail(format!("sidecar at {} sent invalid output (bad escape or base64)", target.url));
    match reply.write_stdout(&mut stdout).and_then(|()| stdout.flush().map_err(ReplyWriteError::Write)) {
        Ok(()) => {}
        Err(ReplyWriteError::Invalid) => return Ok(invalid()),
        Err(ReplyWriteError::Write(_)) => return Ok(ClientExit::code(EXIT_BROKEN_PIPE)),
    }
    let mut stderr = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr().lock());
    if let Err(ReplyWriteError::Invalid) = reply.write_stderr(&mut stderr) {
        return Ok(invalid());
    }
    let _ = stderr.flush();
    let mut notes = Vec::new();
    if reply.output_truncated {
        notes.push("stdout was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    if reply.stderr_truncated {
        notes.push("stderr was cut at the server's output cap; set SIDECAR_STREAM=1 to get all of it".to_owned());
    }
    notes.extend(reply.error.as_deref().map(terminal_safe));
    *written_all = Some(received);
    Ok(reported_code::finished(target, reply.exit_code, reply.timed_out, reply.error.as_deref(), notes))
}
