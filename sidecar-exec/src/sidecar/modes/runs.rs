//! The runs a sidecar keeps, from this side: cancelling ours, `--runs`, `--attach RUNTIME ID`.

use std::time::Duration;

use protocol::{RunId, RunInfo, RunList, RunState};

use crate::exit::ClientExit;
use crate::sidecar::call::output::RunOutput;
use crate::sidecar::call::resume::{self, First, Follow, NextRequest, OwnedRun};
use crate::sidecar::call::signals::CANCEL_WITHIN;
use crate::sidecar::call::stream::ErrorFrames;
use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::{Endpoint, Sidecars, SidecarsError};
use crate::sidecar::wire::body::{read_bounded, small_text, MAX_SMALL_BODY_BYTES};
use crate::sidecar::wire::http::{authorized, http_client, location, refusal, transport_error, ClientSetupError};
use crate::terminal_safe::terminal_safe;

/// The largest `GET /runs` reply read: the server keeps at most `--max-runs` runs (256 by default), each a few
/// hundred bytes plus its argv.
const MAX_LIST_BYTES: usize = 16 * 1024 * 1024;

/// `DELETE /runs/{id}`: a run that may still be running is ended by the server's policy now rather than when the
/// window passes; one that ended, and whose output this client has, is forgotten (see
/// [`crate::sidecar::call::resume::FORGET_ABOVE`]). Best effort, within [`CANCEL_WITHIN`]: the client exits with its own code
/// whatever the answer, and a run not reached is stopped by the window or forgotten after `--retain`.
pub async fn delete(target: &Endpoint, id: &RunId) {
    let Ok(client) = http_client(None, target.socket.as_deref()) else { return };
    let request = authorized(client.delete(target.endpoint(&format!("/runs/{id}"))), target, None);
    let _ = tokio::time::timeout(CANCEL_WITHIN, request.send()).await;
}

/// `--runs`: each configured sidecar's runs, newest first; true when every sidecar answered.
pub async fn list(sidecars: &Sidecars) -> bool {
    let mut all_answered = true;
    for runtime in sidecars.runtimes() {
        match list_one(sidecars, runtime).await {
            Ok(runs) if runs.is_empty() => println!("{runtime:<8} no runs"),
            Ok(runs) => {
                for run in runs {
                    println!("{runtime:<8} {}", line(&run));
                }
            }
            Err(message) => {
                all_answered = false;
                println!("{runtime:<8} {message}");
            }
        }
    }
    all_answered
}

async fn list_one(sidecars: &Sidecars, runtime: &str) -> Result<Vec<RunInfo>, RunListError> {
    let target = sidecars.target(runtime).map_err(RunListError::Misconfigured)?;
    let client = http_client(None, target.socket.as_deref()).map_err(RunListError::Setup)?;
    let request = authorized(client.get(target.endpoint("/runs")), &target, None).timeout(Duration::from_secs(10));
    let response = request.send().await.map_err(|err| RunListError::Unreachable(transport_error(&target, &err)))?;
    let status = response.status();
    if !status.is_success() {
        let location = location(&response);
        let body = small_text(response).await;
        return Err(RunListError::Refused(refusal(&target, None, status, location.as_deref(), &body)));
    }
    let unreadable = |why| RunListError::Unreadable { url: target.url.clone(), why };
    let body = read_bounded(response, MAX_LIST_BYTES.max(MAX_SMALL_BODY_BYTES)).await.map_err(|_| unreadable(None))?;
    serde_json::from_slice::<RunList>(&body).map(|list| list.runs).map_err(|err| unreadable(Some(err)))
}

/// Why one sidecar's runs could not be listed: the line `--runs` prints for it.
#[derive(Debug)]
enum RunListError {
    Misconfigured(SidecarsError),
    Setup(ClientSetupError),
    /// No answer: why (the transport's message).
    Unreachable(String),
    /// An answer that is not 2xx: what it says.
    Refused(String),
    /// A body that is not a run list (too large or cut: no `why`).
    Unreadable {
        url: String,
        why: Option<serde_json::Error>,
    },
}

impl std::fmt::Display for RunListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunListError::Misconfigured(err) => write!(f, "misconfigured: {err}"),
            RunListError::Setup(err) => err.fmt(f),
            RunListError::Unreachable(why) => write!(f, "unreachable: {why}"),
            RunListError::Refused(what) => f.write_str(what),
            RunListError::Unreadable { url, why: None } => {
                write!(f, "sidecar at {url} sent a run list that could not be read")
            }
            RunListError::Unreadable { url, why: Some(err) } => {
                // serde's message quotes what it could not read, which is the server's text.
                write!(f, "sidecar at {url} sent an unreadable run list: {}", terminal_safe(&err.to_string()))
            }
        }
    }
}

/// One run on one line: id, state, exit code, output so far, clients attached, age, then the command.
fn line(run: &RunInfo) -> String {
    let state = match run.state {
        RunState::Running => "running",
        RunState::Exited => "exited",
        RunState::TimedOut => "timed_out",
        RunState::Cancelled => "cancelled",
    };
    let exit = run.exit_code.map_or_else(|| "-".to_owned(), |code| code.to_string());
    format!(
        "{} {state:<9} exit={exit:<4} stdout={} stderr={} attached={} {:.1}s {}{}",
        run.id,
        run.stdout_bytes,
        run.stderr_bytes,
        run.attached,
        run.duration_ms as f64 / 1000.0,
        terminal_safe(&shown_command(&protocol::shell::join(&run.argv))),
        run.error.as_deref().map(|error| format!(" ({})", terminal_safe(error))).unwrap_or_default()
    )
}

/// The most of a run's command line one `--runs` line shows, in bytes: a line stays a line on a terminal (a run's
/// kept argv may hold 4 KiB); `--attach` and the server's `/runs/{id}` still have it whole.
const COMMAND_SHOWN: usize = 200;

/// `command`, cut at a character boundary to at most [`COMMAND_SHOWN`] bytes, saying how much was left out.
fn shown_command(command: &str) -> String {
    if command.len() <= COMMAND_SHOWN {
        return command.to_owned();
    }
    let mut end = COMMAND_SHOWN;
    while !command.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &command[..end], command.len() - end)
}

/// How `--attach` follows a run, from what the server says of it (`GET /runs/{id}`).
#[derive(Debug)]
pub enum AttachMode {
    /// Output only: a run without a terminal, one that ended, or a server that does not say.
    Output,
    /// A running terminal run this client takes over: raw keys to its stdin, the window's size, its screen.
    Terminal,
}

/// Decides how to attach to run `id`, or refuses with the line to print (nothing is owned then).
///
/// *Decision (two clients on one terminal run):* refusal. A terminal run has one keyboard: the client that started
/// it sends its keys, and stdin offsets make a second writer's bytes collide with the first's (one of them is taken,
/// the other counted as a repeat and dropped), so two writers would each lose keys unpredictably. `--attach` takes a
/// terminal run over only when no client follows it (`attached` is 0: its client died or lost its connection), and
/// only from a terminal; otherwise it refuses with a line saying why and what to do. A read-only view was left out:
/// at a terminal the viewer's keys would go nowhere, its Ctrl-C would still end the run it does not drive, and the
/// kept output can be had later with `--attach` from a pipe once the run ended.
pub async fn attach_mode(
    target: &Endpoint,
    id: &RunId,
    patience: crate::sidecar::config::patience::Patience,
) -> Result<AttachMode, ClientExit> {
    let Ok(client) = http_client(None, target.socket.as_deref()) else { return Ok(AttachMode::Output) };
    let request =
        authorized(client.get(target.endpoint(&format!("/runs/{id}"))), target, None).timeout(patience.follow_up());
    let Ok(response) = request.send().await else { return Ok(AttachMode::Output) };
    if !response.status().is_success() {
        // Not known, or not a runs endpoint: following the stream says which, as for any run.
        return Ok(AttachMode::Output);
    }
    let Ok(body) = read_bounded(response, MAX_SMALL_BODY_BYTES).await else { return Ok(AttachMode::Output) };
    let Ok(info) = serde_json::from_slice::<RunInfo>(&body) else { return Ok(AttachMode::Output) };
    if !info.tty || info.state != RunState::Running {
        return Ok(AttachMode::Output);
    }
    if info.attached > 0 {
        return Err(ClientExit::fail(format!(
            "run {id} on the sidecar at {} runs on a terminal and {} client{} follow{} it now: --attach takes a \
             terminal run over only when no client has it, since two keyboards on one terminal would mix their keys; \
             end that client (or wait until its connection is gone), then attach again",
            target.url,
            info.attached,
            if info.attached == 1 { "" } else { "s" },
            if info.attached == 1 { "s" } else { "" },
        )));
    }
    if !crate::at_a_terminal::wanted(None) {
        return Err(ClientExit::fail(format!(
            "run {id} on the sidecar at {} runs on a terminal: attach to it from a terminal (stdin and stdout both \
             terminals), which takes the run over with its keys and window size",
            target.url
        )));
    }
    Ok(AttachMode::Terminal)
}

/// `--attach RUNTIME ID`: prints the run's output kept so far, follows it live across lost connections as a
/// forwarded command does, and ends with its exit code. The attached client owns the run: a signal or a closed
/// stdout cancels it, as for a command it started (`run` says whether that is still due).
pub async fn attach(target: &Endpoint, run: &mut OwnedRun, settings: &CallSettings) -> ClientExit {
    let client = match http_client(Some(settings.patience.silence), target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return ClientExit::fail(err.to_string()),
    };
    let plan = follow_plan(target, &client, settings);
    let mut errors = ErrorFrames { print: true, ..ErrorFrames::default() };
    resume::follow(&plan, run, &mut RunOutput::write(), &mut errors, First::Send(NextRequest::Reattach), None).await
}

fn follow_plan<'a>(target: &'a Endpoint, client: &'a reqwest::Client, settings: &'a CallSettings) -> Follow<'a> {
    Follow {
        target,
        client,
        settings: None,
        body: None,
        verbose: settings.verbose,
        stdin_open: None,
        program: None,
        patience: settings.patience,
        answered: None,
    }
}

/// `--attach` to a running terminal run ([`AttachMode::Terminal`]): the local terminal raw (every key the command's,
/// Ctrl-C included, as for the client that started it), the keys sent from where the run's stdin is, the window's
/// size sent at once and on every change, the screen followed from the kept output. The terminal is restored before
/// this returns. Signals to the client (SIGTERM, SIGHUP when the terminal closes) are delivered to the command, as
/// by the client that started the run.
pub async fn attach_terminal(target: &Endpoint, run: &mut OwnedRun, settings: &CallSettings) -> ClientExit {
    use crate::sidecar::stdin::pump::{PumpEnd, StdinPump};
    use crate::sidecar::stdin::source::StdinSource;
    use crate::sidecar::tty;
    use crate::signals_as_sent::Received;
    let (Some(id), Ok(client)) =
        (run.id.clone(), http_client(Some(settings.patience.silence), target.socket.as_deref()))
    else {
        return ClientExit::fail("cannot set up the HTTP client");
    };
    let Ok(mut received) = crate::signals_as_sent::ForwardedSignals::install() else {
        return ClientExit::fail("cannot install signal handlers");
    };
    if let Err(err) = tty::raw_mode::enter_for_the_command() {
        return ClientExit::fail(format!(
            "cannot put the terminal in raw mode ({err}): attach from a pipe to see its output once it ended"
        ));
    }
    let (_open, opened) = tokio::sync::watch::channel(true);
    let taken = std::cell::Cell::new(0);
    let exit = {
        let pump = async {
            let pump = StdinPump {
                target,
                client: &client,
                settings,
                id: &id,
                source: StdinSource::of_stdin(),
                open: opened,
                taken: &taken,
                ask_offset: true,
            };
            if let PumpEnd::Failed(why) = pump.run().await {
                tty::raw_mode::eprint_line(&format!("sidecar-exec: {why}"));
            }
        };
        let resizes = tty::window::follow(target, &client, settings, &id, true);
        let plan = follow_plan(target, &client, settings);
        let mut errors = ErrorFrames { print: true, ..ErrorFrames::default() };
        let mut output = RunOutput::write();
        let followed = resume::follow(&plan, run, &mut output, &mut errors, First::Send(NextRequest::Reattach), None);
        tokio::pin!(pump, followed, resizes);
        let mut pumping = true;
        loop {
            tokio::select! {
                exit = &mut followed => break exit,
                () = &mut pump, if pumping => pumping = false,
                () = &mut resizes => unreachable!("following the window never ends"),
                signal = received.recv() => match signal {
                    // As for the client that started the run: delivered to the command, which ends by itself.
                    Received::Forward(signal) => {
                        if !crate::sidecar::call::signals::deliver(target, &client, settings, &id, signal).await {
                            break ClientExit::code(128 + signal as i32);
                        }
                    }
                    Received::Stop => crate::sidecar::call::signals::stop_both(target, &client, settings, &id).await,
                },
            }
        }
    };
    tty::raw_mode::restore();
    if run.live && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        let mut stdout = std::io::stdout();
        let _ = std::io::Write::write_all(&mut stdout, tty::SCREEN_RESET.as_bytes())
            .and_then(|()| std::io::Write::flush(&mut stdout));
    }
    exit
}

#[cfg(test)]
mod tests {
    use super::{shown_command, COMMAND_SHOWN};

    #[test]
    fn a_long_command_is_cut_on_its_line_and_says_how_much() {
        assert_eq!(shown_command("npm test"), "npm test");
        let exact = "a".repeat(COMMAND_SHOWN);
        assert_eq!(shown_command(&exact), exact);
        let long = format!("python3 -c {}", "é".repeat(300));
        let shown = shown_command(&long);
        let (kept, rest) = shown.split_once('…').unwrap();
        assert!(kept.len() <= COMMAND_SHOWN && long.starts_with(kept), "{shown}");
        assert_eq!(rest, format!("[{} more bytes]", long.len() - kept.len()));
    }
}
