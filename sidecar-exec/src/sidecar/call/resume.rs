//! Transparent resume: a named run's stream followed across lost connections until its exit frame.
//!
//! The policy, in order:
//! - The client names every run (`run_id`, [`crate::sidecar::call::run_id`]) unless SIDECAR_RESUME=0. A named run
//!   outlives its connection on the server for the server's reattach window.
//! - When the connection fails before the exit frame (reset, EOF, [`Patience::silence`] without a byte), the client
//!   reconnects with [`Backoff`] (50 ms doubling to 2 s) via `GET /runs/{id}/stream?stdout=N&stderr=M&b64_only=true`,
//!   N and M being what it has ([`RunOutput::position`]); replayed bytes below them are trimmed, so nothing is
//!   doubled or missing. Blocking mode counts what it wrote of a reply before it was lost the same way.
//! - It resumes only a server that showed it keeps runs: a frame carried an `offset`, or the runs endpoint
//!   answered (200, or 404 with `"code": "run_not_known"`). Output frames without offsets, or a server without the
//!   endpoint, mean the run id was ignored: the client fails as it always did (cancel on disconnect).
//! - A 404 with `"code": "run_not_known"` before the server ever acknowledged the run (the POST was lost on the way):
//!   the very same body is POSTed again; the id makes that idempotent (a run already started is attached to, never
//!   started twice). The same 404 after the run was acknowledged means it is gone: from another start of the server
//!   (its `x-boot-id` differs from the one that acknowledged the run), the server restarted and the run died with
//!   it; from the same one, the window passed or the ended run is no longer kept, which the client cannot tell apart.
//!   A replay whose exit frame says `"stopped_by": "reattach_window"` is the window's. Each says how much output
//!   arrived, and none advises a rerun: the command did start.
//! - The decisions read the server's codes, never its messages: a 404 without the code is "no runs endpoint"
//!   whatever its text says (a re-POST is safe only on the code's word), and a run's end without `stopped_by` is
//!   reported as the command's own end, with the server's message shown. No text fallback: every exec-server that
//!   keeps runs sends both fields, and a message is prose that any proxy's 404 may happen to contain.
//! - Reconnecting stops after the reconnect window ([`Patience::reconnect_for`], 60 s) without progress, each attempt
//!   answered within the follow-up bound ([`Patience::follow_up`], 10 s): the server is unreachable or silent, and
//!   it stops the run itself when its window passes.

use std::time::{Duration, Instant};

use protocol::{ErrorCode, RunId, StoppedBy};

use crate::exit::ClientExit;
use crate::sidecar::call::output::{RunOutput, RunOutputError};
use crate::sidecar::call::reported_code;
use crate::sidecar::call::stream::{self, ErrorFrames, ExitFrame, StreamEnd, StreamFailure};
use crate::sidecar::config::patience::Patience;
use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::wire::backoff::Backoff;
use crate::sidecar::wire::http::{authorized, refusal, transport_error};
use crate::sidecar::wire::reply_head::ReplyHead;
use crate::terminal_safe::terminal_safe;

/// A run whose output (both streams) was larger than this is forgotten on the server (`DELETE /runs/{id}`) once
/// this client has read and written all of it: the sidecar would otherwise keep its log, in the state folder and the
/// page cache, for its whole `--retain` (5 minutes by default) although only this client knows the id and it needs
/// nothing more. Smaller runs stay kept in the server's memory (a few hundred KiB at most) and listed by `--runs`
/// until then: forgetting them would cost every short command one more request.
pub const FORGET_ABOVE: u64 = 1024 * 1024;

/// Whether a 404 body is exec-server's "this run is not kept here" (`code: run_not_known`). Telling it from any
/// other 404 (a server without the runs endpoint, a proxy) is what makes a re-POST safe, so only the code counts.
fn run_not_known(body: &str) -> bool {
    serde_json::from_str::<protocol::ErrorBody>(body).is_ok_and(|body| body.code == Some(ErrorCode::RunNotKnown))
}

/// The run this client forwards or attached to, and what it knows of it. The client owns it: one that stops while
/// the run may still be going cancels it ([`OwnedRun::needs_cancel`]).
#[derive(Debug)]
pub struct OwnedRun {
    /// Its name; none when SIDECAR_RESUME=0 (the run then ends with its connection, as without resume).
    pub id: Option<RunId>,
    /// A request that may have started it went out and its end was not seen: a client that stops now must cancel
    /// it (`DELETE /runs/{id}`) rather than leave it running until the window passes.
    pub live: bool,
    /// The server acknowledged the run (a 200 to its POST or to a reattach): a later "not known" means it is gone.
    acknowledged: bool,
    /// The boot id of the server that acknowledged it, when it sends one ([`protocol::BOOT_ID_HEADER`]).
    boot: Option<String>,
    /// Whether the server keeps runs, once it has shown it (see the module's policy).
    supported: Option<bool>,
    /// Reconnects that worked.
    pub resumes: u32,
    /// The output's size (both streams), once the run ended and this client has all of it written.
    pub ended_with: Option<u64>,
    /// The exit frame's `stdin_consumed`, when it had one (streamed stdin).
    pub stdin_consumed: Option<u64>,
    /// The signal the command died of, as the server reported it (see [`crate::signal_death`]).
    pub died_of: Option<i32>,
}

impl OwnedRun {
    /// A named run this client is about to start.
    pub fn named(id: RunId) -> Self {
        OwnedRun {
            id: Some(id),
            live: false,
            acknowledged: false,
            boot: None,
            supported: None,
            resumes: 0,
            ended_with: None,
            stdin_consumed: None,
            died_of: None,
        }
    }

    /// A run without a name: never resumed, never cancelled explicitly (its connection's end cancels it).
    pub fn unnamed() -> Self {
        OwnedRun {
            id: None,
            live: false,
            acknowledged: false,
            boot: None,
            supported: Some(false),
            resumes: 0,
            ended_with: None,
            stdin_consumed: None,
            died_of: None,
        }
    }

    /// A run started elsewhere that this client reattaches to (`--attach`): it owns it from now on.
    pub fn attach(id: RunId) -> Self {
        OwnedRun {
            id: Some(id),
            live: true,
            acknowledged: false,
            boot: None,
            supported: Some(true),
            resumes: 0,
            ended_with: None,
            stdin_consumed: None,
            died_of: None,
        }
    }

    /// A 2xx reply head for the run came: the server has it (a later "not known" means it is gone), and `head`'s
    /// boot id, if any, names the start of the server that has it.
    pub fn answered(&mut self, head: &ReplyHead) {
        self.acknowledged = true;
        if self.boot.is_none() {
            self.boot = head.boot.clone();
        }
    }

    /// The id, for messages.
    fn name(&self) -> &str {
        self.id.as_ref().map_or("(unnamed)", RunId::as_str)
    }

    /// Whether the client must cancel the run before it exits: it may still run, and the server may keep it.
    pub fn needs_cancel(&self) -> bool {
        self.id.is_some() && self.live && self.supported != Some(false)
    }

    /// The server said it keeps the run (a blocking reply's [`protocol::RUN_KEPT_HEADER`]).
    pub fn kept(&mut self) {
        self.supported = Some(true);
    }

    /// Whether the client should forget the run on the server before it exits (see [`FORGET_ABOVE`]): only a run
    /// the server showed it keeps (frames with offsets, or [`protocol::RUN_KEPT_HEADER`]).
    pub fn should_forget(&self) -> bool {
        self.id.is_some()
            && !self.live
            && self.supported == Some(true)
            && self.ended_with.is_some_and(|bytes| bytes > FORGET_ABOVE)
    }

    /// Whether a lost connection may be resumed: named, and the server has not shown it ignores names.
    pub fn resumable(&self) -> bool {
        self.id.is_some() && self.supported != Some(false)
    }
}

/// What [`follow`] starts from.
#[derive(Debug)]
pub enum First {
    /// Send this request first.
    Send(NextRequest),
    /// The first request was sent and its reply (2xx, an event stream) is this.
    Reply(reqwest::Response),
}

/// What [`follow`] sends next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextRequest {
    /// `POST /exec/stream` with the body (start or attach, by the id).
    Post,
    /// `GET /runs/{id}/stream` from the output's position.
    Reattach,
}

/// The plan [`follow`] works to: where and how to connect, and what to send (everything besides the run and its
/// output).
pub struct Follow<'a> {
    pub target: &'a Endpoint,
    /// A client with the stream read timeout.
    pub client: &'a reqwest::Client,
    pub settings: Option<&'a CallSettings>,
    /// The request body, for `Post` (none when attaching: nothing to start).
    pub body: Option<&'a [u8]>,
    pub verbose: bool,
    /// Told when a reply says the server opened the run's stdin ([`protocol::STDIN_STREAM_HEADER`]).
    pub stdin_open: Option<&'a tokio::sync::watch::Sender<bool>>,
    /// The command's program name, for a shell's kind of message when it never started.
    pub program: Option<&'a str>,
    /// How long the server may say nothing (see [`Patience`]).
    pub patience: Patience,
    /// Set once a 2xx reply head came: from then on the server has the run (a signal is delivered to it).
    pub answered: Option<&'a std::cell::Cell<bool>>,
}

/// Follows `run` from `first` to its end across lost connections; `lost` is why the connection before this call was
/// lost, when it was (blocking mode resumes here after its `POST /exec` failed).
pub async fn follow(
    plan: &Follow<'_>,
    run: &mut OwnedRun,
    output: &mut RunOutput,
    errors: &mut ErrorFrames,
    first: First,
    mut lost: Option<String>,
) -> ClientExit {
    let target = plan.target;
    let (mut step, mut given) = match first {
        First::Send(step) => (step, None),
        First::Reply(response) => (NextRequest::Post, Some(response)),
    };
    let mut backoff = Backoff::new();
    let reconnect_for = plan.patience.reconnect_for();
    // The loss that began this stretch of reconnecting (what the client last knew of the connection), and when.
    let mut lost_first: Option<(Instant, String)> = lost.clone().map(|why| (Instant::now(), why));
    let mut first_request = lost.is_none();
    loop {
        if let Some(why) = &lost {
            if !run.resumable() {
                return ClientExit::fail(why.clone());
            }
            let (since, first_why) = lost_first.get_or_insert_with(|| (Instant::now(), why.clone()));
            let left = reconnect_for.saturating_sub(since.elapsed());
            if left.is_zero() {
                return gave_up(plan, run, output, first_why, why);
            }
            tokio::time::sleep(backoff.next_wait().min(left)).await;
        }
        let at = output.position();
        let was_first = std::mem::replace(&mut first_request, false);
        let response = match given.take() {
            Some(response) => Ok(response),
            None => match send(plan, run, step, at, lost_first.as_ref().map(|(since, _)| *since)).await {
                Sent::Answer(result) => result,
                Sent::Silent(why) => {
                    lost = Some(why);
                    step = NextRequest::Reattach;
                    continue;
                }
                Sent::Nothing => return ClientExit::fail(lost.unwrap_or_default()),
            },
        };
        let response = match response {
            Ok(response) => response,
            // Nothing reached the server: the command was never started, as without resume.
            Err(err) if was_first && err.is_connect() => return ClientExit::fail(transport_error(target, &err)),
            // The one probe of a server that never showed it keeps runs failed too: it is not one to resume with;
            // the first error says what went wrong.
            Err(err) if step == NextRequest::Reattach && run.supported.is_none() => {
                return ClientExit::fail(lost.unwrap_or_else(|| transport_error(target, &err)));
            }
            Err(err) => {
                lost = Some(transport_error(target, &err));
                step = NextRequest::Reattach;
                continue;
            }
        };
        let head = ReplyHead::of_response(&response);
        if !head.status.is_success() {
            let body = crate::sidecar::wire::body::small_text(response).await;
            let message = refusal(target, plan.settings, head.status, head.location.as_deref(), &body);
            let seen = Seen { was_first, lost: lost.is_some(), posts: plan.body.is_some() };
            match after_refusal(step, &head, &body, run, seen) {
                Refused::Post => step = NextRequest::Post,
                Refused::Retry => lost = Some(message),
                Refused::Restarted => return restarted(target, run, output),
                Refused::NoLongerKnown => return no_longer_known(target, run, output),
                Refused::Fail(why) => return ClientExit::fail(why.message(lost, message, &target.url)),
            }
            continue;
        }
        if let Some(why) = after_answer(step, &head, run) {
            return ClientExit::fail(why.message(lost, String::new(), &target.url));
        }
        reading_starts(plan, run, &head, lost.take().is_some(), at);
        let end = stream::read(target, response, output, errors, plan.patience.silence).await;
        if let Some(resumable) = output.resumable() {
            run.supported = Some(resumable);
        }
        if recovered(output, at) {
            lost_first = None;
            backoff.reset();
        }
        match end {
            StreamEnd::Exit(exit) => {
                run.live = false;
                return finish(plan, run, output, errors, &exit);
            }
            StreamEnd::Failed(failure) => return failed(failure),
            StreamEnd::Lost { why } => {
                lost = Some(why);
                step = NextRequest::Reattach;
            }
        }
    }
}

/// Whether the connection just read counts as a recovery: only one that brought output (past `at`, where it
/// started) does. One cut before its first frame again and again must not keep the client at the shortest wait,
/// nor past the reconnect window.
fn recovered(output: &RunOutput, at: (u64, u64)) -> bool {
    output.position() != at
}

/// What sending the next request came to.
enum Sent {
    /// The server's answer, or why the request failed.
    Answer(Result<reqwest::Response, reqwest::Error>),
    /// No answer within the follow-up bound: the loss to go on from.
    Silent(String),
    /// Nothing to send (no body, no id).
    Nothing,
}

/// Sends `step` from the output's position `at`, waiting for its answer's head at most the follow-up bound (and no
/// longer than what is left of the reconnect window begun at `reconnecting_since`): a server that is there answers
/// a follow-up at once (a stream's frames then have the silence bound of their own, in stream::read).
async fn send(
    plan: &Follow<'_>,
    run: &mut OwnedRun,
    step: NextRequest,
    at: (u64, u64),
    reconnecting_since: Option<Instant>,
) -> Sent {
    let Some(request) = build(plan, run, step, at) else { return Sent::Nothing };
    let within = match reconnecting_since {
        Some(since) => plan.patience.follow_up().min(plan.patience.reconnect_for().saturating_sub(since.elapsed())),
        None => plan.patience.follow_up(),
    };
    match tokio::time::timeout(within.max(Duration::from_millis(100)), request.send()).await {
        Ok(sent) => Sent::Answer(sent),
        Err(_) => Sent::Silent(format!(
            "sidecar at {} did not answer {} within {} s",
            plan.target.url,
            match step {
                NextRequest::Post => "the request sent again",
                NextRequest::Reattach => "a reconnect",
            },
            within.as_secs_f64().ceil()
        )),
    }
}

/// A 2xx head for the run: the stream is about to be read. `resumed`: a lost connection came before it.
fn reading_starts(plan: &Follow<'_>, run: &mut OwnedRun, head: &ReplyHead, resumed: bool, at: (u64, u64)) {
    if resumed {
        run.resumes += 1;
        if plan.verbose {
            let (stdout_at, stderr_at) = at;
            crate::sidecar::tty::raw_mode::eprint_line(&format!(
                "sidecar-exec: connection lost, resumed at stdout {stdout_at}, stderr {stderr_at}"
            ));
        }
    }
    if let (Some(open), true) = (plan.stdin_open, head.stdin_open) {
        open.send_replace(true);
    }
    if head.terminal {
        // The command has a terminal: from now on Ctrl-C and Ctrl-\ are its keys, not the client's signals.
        crate::sidecar::tty::raw_mode::keys_to_the_command();
    }
    run.answered(head);
    if let Some(answered) = plan.answered {
        answered.set(true);
    }
}

/// What [`follow`] knew when a reply came, besides the run: whether it was the call's first request, whether a lost
/// connection came before it, and whether there is a body to POST again.
#[derive(Debug, Clone, Copy)]
struct Seen {
    was_first: bool,
    lost: bool,
    posts: bool,
}

/// What a refused request (a reply that is not 2xx) says to do next.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// The POST never arrived: send it again (the id makes it start the run at most once).
    Post,
    /// Overloaded or restarting (503, or a proxy's 502/504): worth another try while reconnecting, the refusal
    /// being the loss.
    Retry,
    /// Another start of the server: the run died with the one that acknowledged it, whatever was sent.
    Restarted,
    /// The run was acknowledged and is not known now: the window passed, or its end is no longer kept.
    NoLongerKnown,
    Fail(Why),
}

/// The one line a client that gives up prints.
#[derive(Debug, PartialEq, Eq)]
enum Why {
    /// The server's refusal.
    Refusal,
    /// The loss that came first, when there was one (what failed first is what to fix), else the refusal.
    LossOrRefusal,
    /// The loss that came first, else: the server keeps no runs.
    LossOrNoRuns,
}

impl Why {
    fn message(self, lost: Option<String>, refusal: String, url: &str) -> String {
        match self {
            Why::Refusal => refusal,
            Why::LossOrRefusal => lost.unwrap_or(refusal),
            Why::LossOrNoRuns => lost.unwrap_or_else(|| format!("sidecar at {url} keeps no runs")),
        }
    }
}

/// The decider for a 2xx head to `step`: none when its stream is to be read. A reattach answered with anything but
/// an event stream came from a server that answers every path alike: the id was ignored, unless the server had
/// shown it keeps runs. Records in `run` what the head shows.
fn after_answer(step: NextRequest, head: &ReplyHead, run: &mut OwnedRun) -> Option<Why> {
    if step == NextRequest::Reattach {
        if !head.event_stream && run.supported != Some(true) {
            run.supported = Some(false);
            return Some(Why::LossOrNoRuns);
        }
        run.supported = Some(true);
    }
    None
}

/// The decider for a refused request to `step` (a head that is not 2xx, and its `body`): only the server's code
/// counts, never its text. Records in `run` what the reply shows of the server and of the run.
fn after_refusal(step: NextRequest, head: &ReplyHead, body: &str, run: &mut OwnedRun, seen: Seen) -> Refused {
    if step == NextRequest::Reattach && head.status == reqwest::StatusCode::NOT_FOUND {
        if !run_not_known(body) {
            // No runs endpoint: the server ignored the id, and the run ended with its connection.
            run.supported = Some(false);
            return Refused::Fail(Why::LossOrRefusal);
        }
        run.supported = Some(true);
        if head.restarted_since(run.boot.as_deref()) {
            run.live = false;
            return Refused::Restarted;
        }
        if run.acknowledged {
            run.live = false;
            return Refused::NoLongerKnown;
        }
        return if seen.posts { Refused::Post } else { Refused::Fail(Why::Refusal) };
    }
    if !seen.was_first && head.status.is_server_error() && run.supported == Some(true) {
        return Refused::Retry;
    }
    if step == NextRequest::Reattach && run.supported.is_none() && seen.lost {
        // The probe of a server that never showed it keeps runs: what failed first is what to fix.
        return Refused::Fail(Why::LossOrRefusal);
    }
    Refused::Fail(Why::Refusal)
}

/// Reconnecting did not work within the window: the one line that says what the client last knew. `first` is the
/// loss that began the stretch, `last` why the last attempt failed.
fn gave_up(plan: &Follow<'_>, run: &OwnedRun, output: &RunOutput, first: &str, last: &str) -> ClientExit {
    let (stdout_at, stderr_at) = output.position();
    let last = if last == first { String::new() } else { format!(" (the last try: {last})") };
    let known = match run.acknowledged {
        true => format!(
            "it was still running when the sidecar was last heard from, and its output up to stdout byte {stdout_at} \
             and stderr byte {stderr_at} arrived here (the sidecar stops the command when its reattach window passes)"
        ),
        false => "the sidecar never answered for it, so whether the command started there is not known (if it did, \
                  the sidecar stops it when its reattach window passes)"
            .to_owned(),
    };
    ClientExit::fail(format!(
        "{first}; reconnecting for {} s did not work{last}, so sidecar-exec gives up on run {}: {known}",
        plan.patience.reconnect_for().as_secs(),
        run.name()
    ))
}

/// The request for `step`, from the output's position `at`; none when there is nothing to send (no body, no id).
fn build(plan: &Follow<'_>, run: &mut OwnedRun, step: NextRequest, at: (u64, u64)) -> Option<reqwest::RequestBuilder> {
    let (target, (stdout_at, stderr_at)) = (plan.target, at);
    Some(match (step, plan.body, &run.id) {
        (NextRequest::Post, Some(body), _) => {
            run.live = true;
            authorized(plan.client.post(target.endpoint("/exec/stream")), target, plan.settings)
                .header("content-type", "application/json")
                .body(body.to_vec())
        }
        (_, _, Some(id)) => authorized(
            // b64_only as the POST asked: binary output without its lossy twin (the server's choice is per reader).
            plan.client.get(
                target.endpoint(&format!("/runs/{id}/stream?stdout={stdout_at}&stderr={stderr_at}&b64_only=true")),
            ),
            target,
            plan.settings,
        ),
        (_, _, None) => return None,
    })
}

/// The exit frame: checked against what arrived, kept output written (blocking mode), the code worked out.
fn finish(
    plan: &Follow<'_>,
    run: &mut OwnedRun,
    output: &mut RunOutput,
    errors: &ErrorFrames,
    exit: &ExitFrame,
) -> ClientExit {
    let target = plan.target;
    // Stopped for lack of a client while this one (or, for `--attach`, the one that started it) was away.
    let was_away = run.resumes > 0 || plan.body.is_none();
    if was_away && exit.stopped_by == Some(StoppedBy::ReattachWindow) {
        return window_passed(target, run, output);
    }
    if let Err((stream, got, total)) = output.complete(exit.stdout_bytes, exit.stderr_bytes) {
        return ClientExit::fail(format!(
            "sidecar at {} reported {total} bytes of {} for run {}, but {got} arrived: the output is incomplete",
            target.url,
            stream.as_str(),
            run.name()
        ));
    }
    if let Err(err) = output.finish() {
        return failed(StreamFailure::Output(err));
    }
    run.ended_with = Some(exit.stdout_bytes.unwrap_or(0) + exit.stderr_bytes.unwrap_or(0));
    run.stdin_consumed = exit.stdin_consumed;
    run.died_of = exit.signal;
    // Streaming mode printed each error frame already; blocking mode tells it once at the end, as its reply does.
    let notes = if errors.print { Vec::new() } else { errors.last.as_deref().map(terminal_safe).into_iter().collect() };
    let outcome = reported_code::ReportedEnd {
        code: exit.code,
        timed_out: exit.timed_out,
        error: errors.last.as_deref(),
        start_error: errors.start_error,
    };
    reported_code::finished(target, plan.settings, plan.program, &outcome, notes)
}

/// The sidecar stopped the run because no client was reading it: it ran until then, so the line says how much of
/// its output arrived and never advises a blind rerun (a deploy or a publish may have been half done).
fn window_passed(target: &Endpoint, run: &OwnedRun, output: &RunOutput) -> ClientExit {
    let (stdout_at, stderr_at) = output.position();
    ClientExit::fail(format!(
        "the connection to the sidecar at {} was lost for longer than its reattach window, so the sidecar stopped \
         the command (run {}) part way: its output up to stdout byte {stdout_at} and stderr byte {stderr_at} \
         arrived here; check what it did before running it again",
        target.url,
        run.name()
    ))
}

/// The same server (the same boot id, or one that sends none) no longer knows a run it acknowledged: the window
/// passed, or the run ended and was forgotten (past `--retain`, or past the bound on what is kept of forgotten
/// runs). Which one is not known, so the line says both and never "run it again": the command did start.
fn no_longer_known(target: &Endpoint, run: &OwnedRun, output: &RunOutput) -> ClientExit {
    let (stdout_at, stderr_at) = output.position();
    ClientExit::fail(format!(
        "the sidecar at {} no longer knows run {}, which it had started: either the connection was lost for longer \
         than its reattach window and it stopped the command, or the command ended and the sidecar no longer keeps \
         its result; its output up to stdout byte {stdout_at} and stderr byte {stderr_at} arrived here, and how it \
         ended is not known, so check what it did before running it again",
        target.url,
        run.name()
    ))
}

/// The server that answers now is another start than the one that acknowledged the run (their boot ids differ):
/// the run died with the previous start, since runs do not survive a restart.
fn restarted(target: &Endpoint, run: &OwnedRun, output: &RunOutput) -> ClientExit {
    let (stdout_at, stderr_at) = output.position();
    ClientExit::fail(format!(
        "the sidecar at {} answers as another server start than the one that ran run {} (its boot id changed), \
         and that start does not know the run: the sidecar restarted and the command died with the previous server \
         (or, behind a load balancer of several replicas, this is another replica); its output up to stdout byte \
         {stdout_at} and stderr byte {stderr_at} arrived here, and how far it got is not known, so check what it \
         did before running it again",
        target.url,
        run.name()
    ))
}

fn failed(failure: StreamFailure) -> ClientExit {
    match failure {
        StreamFailure::Output(RunOutputError::BrokenPipe) => ClientExit::code(crate::exit::EXIT_BROKEN_PIPE),
        StreamFailure::Output(RunOutputError::BadBase64) => ClientExit::fail("the sidecar sent invalid base64 output"),
        StreamFailure::Output(RunOutputError::Gap { stream, at, expected }) => ClientExit::fail(format!(
            "the sidecar sent {} from byte {at} on, but only {expected} bytes of it had arrived: giving up rather \
             than leave a hole in the output",
            stream.as_str()
        )),
        StreamFailure::Output(RunOutputError::Overflow { stream, at, len }) => ClientExit::fail(format!(
            "the sidecar sent a {} frame of {len} bytes at byte {at}, past the largest offset a stream can have: \
             giving up rather than guess what is missing (dropped or not)",
            stream.as_str()
        )),
        StreamFailure::Output(RunOutputError::TooLarge) => ClientExit::fail(format!(
            "the command's output is larger than {} for one stream, more than blocking mode holds: set \
             SIDECAR_STREAM=1 for output this large",
            crate::sidecar::wire::body::mib(crate::sidecar::wire::body::MAX_REPLY_BYTES)
        )),
        StreamFailure::Oversized { url, err } => ClientExit::fail(format!(
            "sidecar at {url} sent {err} in its event stream, far more than any exec-server event (under 1 MiB): \
             giving up on it"
        )),
        StreamFailure::BadFrame { url, err } => {
            ClientExit::fail(format!("sidecar at {url} sent an unreadable frame ({err})"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, headers: &[(&str, &str)]) -> ReplyHead {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            map.append(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                reqwest::header::HeaderValue::from_str(value).unwrap(),
            );
        }
        ReplyHead::of(reqwest::StatusCode::from_u16(status).unwrap(), &map)
    }

    const NOT_KNOWN: &str = r#"{"error":"run r is not known","code":"run_not_known"}"#;
    const AFTER_LOSS: Seen = Seen { was_first: false, lost: true, posts: true };

    #[test]
    fn a_reattach_answered_without_a_stream_means_the_id_was_ignored() {
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        assert_eq!(after_answer(NextRequest::Reattach, &head(200, &[]), &mut run), Some(Why::LossOrNoRuns));
        assert_eq!(run.supported, Some(false));
        let mut keeps = OwnedRun::attach(RunId::new("r").unwrap());
        assert_eq!(after_answer(NextRequest::Reattach, &head(200, &[]), &mut keeps), None, "it showed it keeps runs");
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        let stream = head(200, &[("content-type", "text/event-stream")]);
        assert_eq!(after_answer(NextRequest::Reattach, &stream, &mut run), None);
        assert_eq!(run.supported, Some(true), "the runs endpoint answered");
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        assert_eq!(after_answer(NextRequest::Post, &head(200, &[]), &mut run), None);
        assert_eq!(run.supported, None, "a POST's answer says nothing of the runs endpoint");
    }

    #[test]
    fn a_run_not_known_is_posted_again_until_the_server_acknowledged_it() {
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        assert_eq!(
            after_refusal(NextRequest::Reattach, &head(404, &[]), NOT_KNOWN, &mut run, AFTER_LOSS),
            Refused::Post
        );
        assert_eq!(run.supported, Some(true));
        let attaching = Seen { posts: false, ..AFTER_LOSS };
        let refused = after_refusal(NextRequest::Reattach, &head(404, &[]), NOT_KNOWN, &mut run, attaching);
        assert_eq!(refused, Refused::Fail(Why::Refusal), "nothing to post: the run is not there");
        run.acknowledged = true;
        run.live = true;
        let refused = after_refusal(NextRequest::Reattach, &head(404, &[]), NOT_KNOWN, &mut run, AFTER_LOSS);
        assert_eq!(refused, Refused::NoLongerKnown);
        assert!(!run.live);
    }

    #[test]
    fn a_run_not_known_to_another_start_of_the_server_died_with_it() {
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        run.boot = Some("a".to_owned());
        run.live = true;
        let restarted = head(404, &[("x-boot-id", "b")]);
        assert_eq!(
            after_refusal(NextRequest::Reattach, &restarted, NOT_KNOWN, &mut run, AFTER_LOSS),
            Refused::Restarted
        );
        assert!(!run.live);
    }

    #[test]
    fn a_404_without_the_code_is_no_runs_endpoint_whatever_its_text() {
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        let body = "run r is not known";
        let refused = after_refusal(NextRequest::Reattach, &head(404, &[]), body, &mut run, AFTER_LOSS);
        assert_eq!(refused, Refused::Fail(Why::LossOrRefusal));
        assert_eq!(run.supported, Some(false));
    }

    #[test]
    fn a_server_error_is_retried_only_while_reconnecting_to_a_server_that_keeps_runs() {
        let mut keeps = OwnedRun::attach(RunId::new("r").unwrap());
        assert_eq!(after_refusal(NextRequest::Reattach, &head(503, &[]), "", &mut keeps, AFTER_LOSS), Refused::Retry);
        let first = Seen { was_first: true, lost: false, posts: true };
        assert_eq!(
            after_refusal(NextRequest::Post, &head(503, &[]), "", &mut keeps, first),
            Refused::Fail(Why::Refusal)
        );
        let mut unknown = OwnedRun::named(RunId::new("r").unwrap());
        let refused = after_refusal(NextRequest::Reattach, &head(503, &[]), "", &mut unknown, AFTER_LOSS);
        assert_eq!(refused, Refused::Fail(Why::LossOrRefusal), "the probe failed: the first loss is what to fix");
        assert_eq!(
            after_refusal(NextRequest::Post, &head(401, &[]), "", &mut unknown, AFTER_LOSS),
            Refused::Fail(Why::Refusal)
        );
    }

    #[test]
    fn the_first_loss_is_the_message_when_there_was_one() {
        let target = "http://builder:8080";
        assert_eq!(Why::LossOrRefusal.message(Some("lost".into()), "refused".into(), target), "lost");
        assert_eq!(Why::LossOrRefusal.message(None, "refused".into(), target), "refused");
        assert_eq!(Why::Refusal.message(Some("lost".into()), "refused".into(), target), "refused");
        assert!(Why::LossOrNoRuns.message(None, String::new(), target).ends_with("keeps no runs"));
    }

    #[test]
    fn only_a_run_the_server_may_keep_is_cancelled() {
        assert!(!OwnedRun::unnamed().needs_cancel() && !OwnedRun::unnamed().resumable());
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        assert!(!run.needs_cancel(), "nothing sent yet");
        run.live = true;
        assert!(run.needs_cancel());
        run.supported = Some(false);
        assert!(!run.needs_cancel(), "the server ignored the id: the closed connection cancels it");
        assert!(OwnedRun::attach(RunId::new("r").unwrap()).needs_cancel());
    }

    #[test]
    fn only_a_large_run_read_to_its_end_is_forgotten() {
        let mut run = OwnedRun::named(RunId::new("r").unwrap());
        run.ended_with = Some(FORGET_ABOVE + 1);
        assert!(!run.should_forget(), "the server has not shown that it keeps runs");
        run.kept();
        assert!(run.should_forget());
        run.ended_with = Some(FORGET_ABOVE);
        assert!(!run.should_forget(), "small output stays kept (and listed)");
        run.ended_with = None;
        assert!(!run.should_forget(), "not read to its end: kept for --attach");
        let mut unnamed = OwnedRun::unnamed();
        unnamed.ended_with = Some(FORGET_ABOVE + 1);
        assert!(!unnamed.should_forget());
    }

    #[test]
    fn only_the_code_says_a_run_is_not_known() {
        assert!(run_not_known(r#"{"error":"run x is not known","code":"run_not_known"}"#));
        assert!(!run_not_known(r#"{"error":"run x is not known: it never existed"}"#), "text is not a code");
        assert!(!run_not_known(r#"{"error":"gone","code":"quota_spent"}"#));
        assert!(!run_not_known("404 page not found"));
    }
}
