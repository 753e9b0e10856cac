//! Forwarding one command: negotiated (`POST /exec` that takes an event stream when the server has one, the
//! default), streaming (`POST /exec/stream`) or blocking (`POST /exec`), resumed when the connection is lost
//! ([`crate::sidecar::call::resume`]), and how the client ends. In the streaming modes the client's stdin is streamed
//! beside the output ([`crate::sidecar::stdin::pump`]) and the signals it gets are delivered as sent
//! ([`crate::sidecar::call::signals`]); at a terminal, the streamed call runs on a remote one ([`on_terminal`]).

use std::cell::Cell;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::sidecar::wire::reply_reader::ReplyWriteError;

pub use crate::exit::ClientExit;
use crate::exit::EXIT_BROKEN_PIPE;
use crate::sidecar::call::output::RunOutput;
use crate::sidecar::call::reported_code::{self, ReportedEnd};
use crate::sidecar::call::resume::{self, First, Follow, NextRequest, OwnedRun};
use crate::sidecar::call::signals;
use crate::sidecar::call::stream::ErrorFrames;
use crate::sidecar::config::settings::{CallSettings, OutputMode};
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::stdin::pump::{PumpEnd, StdinPump};
use crate::sidecar::stdin::source::StdinSource;
use crate::sidecar::tty;
use crate::sidecar::wire::body::{mib, read_reply, small_text, BodyError, MAX_REPLY_BYTES};
use crate::sidecar::wire::http::{authorized, http_client, refusal, transport_error};
use crate::sidecar::wire::reply_head::ReplyHead;
use crate::signals_as_sent::{ForwardedSignals, Received};
use crate::terminal_safe::terminal_safe;

/// One call: where it goes, with what, and what it knows of the command.
pub struct Call<'a> {
    pub target: &'a Endpoint,
    pub settings: &'a CallSettings,
    /// The request (already checked against the body limit).
    pub body: Vec<u8>,
    /// The command's program name (`cmd[0]`), for the shell's kind of message when it never started.
    pub program: &'a str,
    /// What is streamed as stdin (the request asked for `stdin_stream` unless [`StdinSource::Nothing`]).
    pub stdin: StdinSource,
}

/// How long the client waits on a 503 that carries `Retry-After` before it gives up on the sidecar: a sidecar whose
/// `--max-runs` or `--max-concurrent` is full is busy, not gone.
pub const BUSY_FOR: Duration = Duration::from_secs(60);

/// The blocking call (SIDECAR_STREAM=0): `POST /exec`, one reply at the end, exactly the contract's original blocking
/// client.
/// `run` is the run the body starts (named or not; see [`crate::sidecar::call::resume`]): it says afterwards whether the
/// client must cancel it.
pub async fn blocking(call: &Call<'_>, run: &mut OwnedRun) -> ClientExit {
    let (target, settings) = (call.target, call.settings);
    let client = match http_client(None, target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    let sent = |client: &reqwest::Client| {
        authorized(client.post(target.endpoint("/exec")), target, Some(settings))
            .header("content-type", "application/json")
            .body(call.body.clone())
            .timeout(settings.blocking_deadline())
    };
    run.live = true;
    match send_when_free(target, settings, settings.blocking_deadline(), || sent(&client)).await {
        Sent::Reply(response) => reply(call, run, response).await,
        Sent::Lost(lost) => resume_reply(call, run, lost, 0).await,
        Sent::Ended(exit) => exit,
    }
}

/// The default (negotiated) and streaming calls, with stdin streamed and signals delivered as sent. Ends when the
/// exit frame comes, whatever stdin does.
pub async fn streamed(call: &Call<'_>, run: &mut OwnedRun) -> ClientExit {
    let Ok(received) = ForwardedSignals::install() else {
        return ClientExit::fail("cannot install signal handlers");
    };
    streamed_with(call, run, received).await
}

/// [`streamed`] with its signal handlers already installed (before a terminal goes raw: a Ctrl-C typed then must
/// find them).
async fn streamed_with(call: &Call<'_>, run: &mut OwnedRun, mut received: ForwardedSignals) -> ClientExit {
    let (target, settings) = (call.target, call.settings);
    let negotiate = settings.mode == OutputMode::Negotiate;
    // Negotiated: no read timeout on the client, a contract server's JSON reply comes only at the end (the stream
    // reader keeps its own, see sidecar::stream).
    let client = match http_client((!negotiate).then_some(settings.patience.silence), target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    let (open, opened) = tokio::sync::watch::channel(false);
    let taken = Cell::new(0);
    // Whether a reply head for the run came: until then a signal ends the client (there is nothing to deliver it
    // to yet), and a stdin the server did not open was not refused by it.
    let answered = Cell::new(false);
    let id = run.id.clone();
    let pump = async {
        match (&id, call.stdin.streams()) {
            (Some(id), true) => {
                let pump = StdinPump {
                    target,
                    client: &client,
                    settings,
                    id,
                    source: call.stdin,
                    open: opened,
                    taken: &taken,
                    ask_offset: false,
                };
                if let PumpEnd::Failed(why) = pump.run().await {
                    tty::raw_mode::eprint_line(&format!("sidecar-exec: {why}"));
                }
            }
            _ => std::future::pending().await,
        }
    };
    let (exit, interrupted) = {
        let output = follow_call(call, &mut *run, &client, &open, &answered, negotiate);
        tokio::pin!(pump, output);
        let mut pumping = true;
        loop {
            tokio::select! {
                exit = &mut output => break (exit, None),
                () = &mut pump, if pumping => pumping = false,
                signal = received.recv() => {
                    let (Some(id), true) = (&id, answered.get()) else {
                        match signal {
                            // Only this process stops, as the blocking client does: no run takes the signal yet (none
                            // named, or no reply head so far).
                            Received::Stop => {
                                tty::raw_mode::cooked_while(crate::signals_as_sent::stop_self);
                                continue;
                            }
                            // Unnamed: the closed connection cancels the run, as the blocking client does.
                            Received::Forward(signal) if id.is_none() => break (ClientExit::code(128 + signal as i32), None),
                            // Before the reply head the client ends as a native program the signal interrupts (it dies
                            // of it); a run the request may have started is cancelled on the way out (`release`).
                            Received::Forward(signal) => break (ClientExit::code(128 + signal as i32), Some(signal)),
                        }
                    };
                    match signal {
                        Received::Forward(signal) => {
                            if !signals::deliver(target, &client, settings, id, signal).await {
                                // The server takes no signals for the run (not ours, not named, gone): cancel it, as
                                // the blocking client does.
                                break (ClientExit::code(128 + signal as i32), None);
                            }
                        }
                        Received::Stop => signals::stop_both(target, &client, settings, id).await,
                    }
                }
            }
        }
    };
    if let Some(signal) = interrupted {
        run.died_of = Some(signal as i32);
    }
    // Only a server that answered for the run and did not open its stdin is one that does not take streamed stdin
    // (a refused request, or no answer at all, says nothing of that).
    if answered.get()
        && !*open.borrow()
        && call.stdin == StdinSource::Stream
        && crate::sidecar::stdin::policy::has_data_now()
    {
        tty::raw_mode::eprint_line(&format!(
            "sidecar-exec: the sidecar at {} does not take streamed stdin (an older server or the contract's): \
             stdin was not forwarded",
            target.url
        ));
    }
    // A regular file is left where a native run leaves it: after what the command consumed.
    if *open.borrow() {
        call.stdin.leave_offset(run.stdin_consumed.unwrap_or(taken.get()));
    }
    exit
}

/// A streamed call ([`streamed`]) on a terminal ([`tty`]): raw mode for its duration, the window size followed. The
/// terminal is restored before this returns, so the caller's message (if any) prints on a cooked terminal.
pub async fn on_terminal(call: &Call<'_>, run: &mut OwnedRun) -> ClientExit {
    let panic_on_request = tty::panic_on_request::arm();
    let Ok(received) = ForwardedSignals::install() else {
        return ClientExit::fail("cannot install signal handlers");
    };
    tty::note_a_terminal_left_raw();
    if let Err(err) = tty::raw_mode::enter() {
        return ClientExit::fail(format!("cannot put the terminal in raw mode ({err}): set SIDECAR_TTY=0"));
    }
    let exit = {
        let id = run.id.clone();
        let resizes = async {
            match (&id, http_client(Some(call.settings.patience.silence), call.target.socket.as_deref())) {
                (Some(id), Ok(client)) => tty::window::follow(call.target, &client, call.settings, id, false).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            exit = streamed_with(call, run, received) => exit,
            () = resizes => unreachable!("following the window never ends"),
            () = panic_on_request.fire() => unreachable!("the switch panics or never ends"),
        }
    };
    tty::raw_mode::restore();
    if run.live && std::io::stdout().is_terminal() {
        let mut stdout = std::io::stdout();
        let _ = stdout.write_all(tty::SCREEN_RESET.as_bytes()).and_then(|()| stdout.flush());
    }
    exit
}

/// The first request of a streamed call, then its stream (or, from a server that does not stream, its JSON reply).
async fn follow_call(
    call: &Call<'_>,
    run: &mut OwnedRun,
    client: &reqwest::Client,
    open: &tokio::sync::watch::Sender<bool>,
    answered: &Cell<bool>,
    negotiate: bool,
) -> ClientExit {
    let (target, settings) = (call.target, call.settings);
    let first = || {
        let request = match negotiate {
            true => authorized(client.post(target.endpoint("/exec")), target, Some(settings))
                .header("accept", protocol::STREAM_ACCEPT)
                .timeout(settings.blocking_deadline()),
            false => authorized(client.post(target.endpoint("/exec/stream")), target, Some(settings)),
        };
        request.header("content-type", "application/json").body(call.body.clone())
    };
    run.live = true;
    // A stream's head is part of the stream: it comes at once from exec-server, and one that never comes (or comes a
    // byte at a time) is given the silence bound, all of it; a negotiated call's may be a contract server's JSON
    // reply, which comes at the command's end.
    let head_within = match negotiate {
        true => settings.blocking_deadline(),
        false => settings.patience.silence,
    };
    let (response, lost) = match send_when_free(target, settings, head_within, first).await {
        Sent::Reply(response) => (Some(response), None),
        Sent::Lost(lost) => (None, Some(lost)),
        Sent::Ended(exit) => return exit,
    };
    let Some(response) = response else {
        return follow_stream(call, run, client, open, answered, First::Send(NextRequest::Reattach), lost).await;
    };
    if negotiate && !ReplyHead::of_response(&response).event_stream {
        answered.set(true);
        return reply(call, run, response).await;
    }
    follow_stream(call, run, client, open, answered, First::Reply(response), None).await
}

/// A streamed call's output, written as it comes, followed across lost connections.
async fn follow_stream(
    call: &Call<'_>,
    run: &mut OwnedRun,
    client: &reqwest::Client,
    open: &tokio::sync::watch::Sender<bool>,
    answered: &Cell<bool>,
    first: First,
    lost: Option<String>,
) -> ClientExit {
    let (target, settings) = (call.target, call.settings);
    let plan = Follow {
        target,
        client,
        settings: Some(settings),
        body: Some(&call.body),
        verbose: settings.verbose,
        stdin_open: Some(open),
        program: Some(call.program),
        patience: settings.patience,
        answered: Some(answered),
    };
    let mut errors = ErrorFrames { print: true, ..ErrorFrames::default() };
    resume::follow(&plan, run, &mut RunOutput::write(), &mut errors, first, lost).await
}

/// What became of the first request.
enum Sent {
    /// A 2xx reply.
    Reply(reqwest::Response),
    /// The connection failed after the request may have reached the server: why (a named run is resumed).
    Lost(String),
    /// Nothing to go on with: the call's end.
    Ended(ClientExit),
}

/// Sends the first request (`request` builds it again for a retry). A 503 with `Retry-After` (the sidecar is full)
/// is retried after the time it asks for (1 to 10 s), for [`BUSY_FOR`] at most, with one line saying so; anything
/// else that is not 2xx, a failure to connect or no reply head within `head_within` is the call's end.
async fn send_when_free(
    target: &Endpoint,
    settings: &CallSettings,
    head_within: Duration,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> Sent {
    let started = Instant::now();
    let mut told = false;
    loop {
        let no_head = || {
            Sent::Ended(ClientExit::fail(format!(
                "sidecar at {} sent no reply head within {} s: the request was sent and no reply came, so whether \
                 the command started there is not known (if it did, it is cancelled)",
                target.url,
                head_within.as_secs()
            )))
        };
        let Ok(sent) = tokio::time::timeout(head_within, request().send()).await else { return no_head() };
        let response = match sent {
            Ok(response) => response,
            // Never connected: nothing started.
            Err(err) if err.is_connect() => return Sent::Ended(ClientExit::fail(transport_error(target, &err))),
            // The client's read timeout (the silence bound of a streaming call) before the head.
            Err(err) if err.is_timeout() => return no_head(),
            Err(err) => return Sent::Lost(transport_error(target, &err)),
        };
        let head = ReplyHead::of_response(&response);
        let status = head.status;
        if status.is_success() {
            return Sent::Reply(response);
        }
        let body = small_text(response).await;
        let message = refusal(target, Some(settings), status, head.location.as_deref(), &body);
        match head.retry_after {
            Some(wait) if status == reqwest::StatusCode::SERVICE_UNAVAILABLE && started.elapsed() + wait < BUSY_FOR => {
                if !std::mem::replace(&mut told, true) {
                    tty::raw_mode::eprint_line(&format!(
                        "sidecar-exec: {message}; retrying for up to {} s",
                        BUSY_FOR.as_secs()
                    ));
                }
                tokio::time::sleep(wait).await;
            }
            _ if told => {
                let waited = started.elapsed().as_secs();
                return Sent::Ended(ClientExit::fail(format!(
                    "{message} (still refused after {waited} s of retrying)"
                )));
            }
            _ => return Sent::Ended(ClientExit::fail(message)),
        }
    }
}

/// What a blocking reply said besides the exit: its size once all of it was written, and the signal the command
/// died of.
#[derive(Debug, Default)]
struct Ended {
    written_all: Option<u64>,
    signal: Option<i32>,
}

/// A JSON reply to `POST /exec` (blocking, or negotiated with a server that does not stream), reproduced; when the
/// connection is lost while it arrives, a named run is followed from what was written.
async fn reply(call: &Call<'_>, run: &mut OwnedRun, response: reqwest::Response) -> ClientExit {
    let head = ReplyHead::of_response(&response);
    // Only a server that said it keeps the run is asked to forget it (see `OwnedRun::should_forget`).
    if head.run_kept {
        run.kept();
    }
    // The server took the request: a lost reply is followed, never sent again.
    run.answered(&head);
    let mut ended = Ended::default();
    match blocking_reply(call, response, &mut ended).await {
        Ok(exit) => {
            run.live = false;
            run.ended_with = ended.written_all;
            run.died_of = ended.signal;
            exit
        }
        Err((lost, stdout_written)) => resume_reply(call, run, lost, stdout_written).await,
    }
}

/// The blocking reply was lost on the way: follow the run's stream from what was already written of stdout (the
/// command's first bytes, see `body::read_reply`), keep it, print it as the reply would.
async fn resume_reply(call: &Call<'_>, run: &mut OwnedRun, lost: String, stdout_written: u64) -> ClientExit {
    if !run.resumable() {
        return ClientExit::fail(lost);
    }
    let client = match http_client(Some(call.settings.patience.silence), call.target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    let plan = Follow {
        target: call.target,
        client: &client,
        settings: Some(call.settings),
        body: Some(&call.body),
        verbose: call.settings.verbose,
        stdin_open: None,
        program: Some(call.program),
        patience: call.settings.patience,
        answered: None,
    };
    let mut errors = ErrorFrames::default();
    let mut output = RunOutput::collect_after(stdout_written);
    resume::follow(&plan, run, &mut output, &mut errors, First::Send(NextRequest::Reattach), Some(lost)).await
}

/// The reply of `POST /exec`, reproduced; `ended.written_all` gets the reply's size once all of it was written (it stands
/// for the output's: escaped JSON is at least as large; see [`OwnedRun::should_forget`]). `Err` when the connection was
/// lost while reading it: why, and how many bytes of stdout were written meanwhile (the command's first ones: see
/// [`crate::sidecar::wire::body::read_reply`]).
async fn blocking_reply(
    call: &Call<'_>,
    response: reqwest::Response,
    ended: &mut Ended,
) -> Result<ClientExit, (String, u64)> {
    let (target, settings) = (call.target, call.settings);
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
        Err(BodyError::Write) => return Ok(ClientExit::code(EXIT_BROKEN_PIPE)),
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
    ended.written_all = Some(received);
    ended.signal = reply.signal;
    let outcome = ReportedEnd {
        code: reply.exit_code,
        timed_out: reply.timed_out,
        error: reply.error.as_deref(),
        start_error: reply.start_error,
    };
    if reported_code::as_shell(outcome.start_error, call.program).is_some() {
        notes.clear();
    }
    Ok(reported_code::finished(target, Some(settings), Some(call.program), &outcome, notes))
}
