//! The runs a sidecar keeps (issue 12), from this side: cancelling ours, `--runs`, `--attach RUNTIME ID`.

use std::time::Duration;

use protocol::{RunId, RunInfo, RunList, RunState};

use crate::exit::ClientExit;
use crate::shown::shown;
use crate::sidecar::body::{read_bounded, small_text, MAX_SMALL_BODY_BYTES};
use crate::sidecar::http::{authorized, http_client, location, refusal, transport_error};
use crate::sidecar::output::Output;
use crate::sidecar::resume::{self, Follow, Run, Step};
use crate::sidecar::sidecars::{Sidecars, Target};
use crate::sidecar::stream::Errors;

/// How long cancelling a run may take: the client is on its way out (a signal, a closed stdout), and a sidecar that
/// does not answer soon stops the run itself when its reattach window passes.
pub const CANCEL_WITHIN: Duration = Duration::from_secs(3);

/// The largest `GET /runs` reply read: the server keeps at most `--max-runs` runs (256 by default), each a few
/// hundred bytes plus its argv.
const MAX_LIST_BYTES: usize = 16 * 1024 * 1024;

/// `DELETE /runs/{id}`: a run that may still be running is ended by the server's policy now rather than when the
/// window passes; one that ended, and whose output this client has, is forgotten (see
/// [`crate::sidecar::resume::FORGET_ABOVE`]). Best effort, within [`CANCEL_WITHIN`]: the client exits with its own code
/// whatever the answer, and a run not reached is stopped by the window or forgotten after `--retain`.
pub async fn delete(target: &Target, id: &RunId) {
    let Ok(client) = http_client(false, target.socket.as_deref()) else { return };
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

async fn list_one(sidecars: &Sidecars, runtime: &str) -> Result<Vec<RunInfo>, String> {
    let target = sidecars.target(runtime).map_err(|err| format!("misconfigured: {err}"))?;
    let client = http_client(false, target.socket.as_deref())?;
    let request = authorized(client.get(target.endpoint("/runs")), &target, None).timeout(Duration::from_secs(10));
    let response = request.send().await.map_err(|err| format!("unreachable: {}", transport_error(&target, &err)))?;
    let status = response.status();
    if !status.is_success() {
        let location = location(&response);
        let body = small_text(response).await;
        return Err(refusal(&target, None, status, location.as_deref(), &body));
    }
    let body = read_bounded(response, MAX_LIST_BYTES.max(MAX_SMALL_BODY_BYTES))
        .await
        .map_err(|_| format!("sidecar at {} sent a run list that could not be read", target.url))?;
    serde_json::from_slice::<RunList>(&body)
        .map(|list| list.runs)
        .map_err(|err| format!("sidecar at {} sent an unreadable run list: {err}", target.url))
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
        shown(&protocol::shell::join(&run.argv)),
        run.error.as_deref().map(|error| format!(" ({})", shown(error))).unwrap_or_default()
    )
}

/// `--attach RUNTIME ID`: prints the run's output kept so far, follows it live across lost connections as a
/// forwarded command does, and ends with its exit code. The attached client owns the run: a signal or a closed
/// stdout cancels it, as for a command it started (`run` says whether that is still due).
pub async fn attach(target: &Target, run: &mut Run, verbose: bool) -> ClientExit {
    let client = match http_client(true, target.socket.as_deref()) {
        Ok(client) => client,
        Err(message) => return ClientExit::fail(message),
    };
    let how = Follow { target, client: &client, settings: None, body: None, verbose };
    let mut errors = Errors { last: None, print: true };
    resume::follow(&how, run, &mut Output::write(), &mut errors, Step::Reattach, None).await
}
