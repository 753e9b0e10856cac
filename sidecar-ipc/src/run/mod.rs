//! `sidecar-ipc run -- CMD …`: the orchestrator's supervisor. However the orchestrator ends (exit, crash, signal,
//! timeout), the run ends properly: a run result exists (the orchestrator's own if it wrote a valid one, otherwise an
//! error result saying how it ended), and `/ipc/done` is written last, once the orchestrator's whole process group
//! is gone and no request of it is waiting for its answer (up to `--drain`).

use std::ffi::OsString;
use std::time::Duration;

use agent_files::FileVersion;
use nix::sys::signal::Signal;
use process_group::{self as group, exit_code_of, next_stop_signal, StopSignals};
use serde_json::json;
use tokio::time::{sleep_until, Instant};

use crate::exit::TIMED_OUT;
use crate::finish::{self, SUPERVISED_VAR};
use crate::ipc::{self, Ipc};
use crate::{inflight, run_config};

pub struct RunArgs {
    pub command: Vec<OsString>,
    pub timeout: Option<Duration>,
    pub grace: Duration,
    pub drain: Duration,
}

/// How the orchestrator ended.
struct OrchestratorEnd {
    /// Our exit code: the orchestrator's, 128+N for signal N, 124 on timeout.
    code: i32,
    /// "the orchestrator exited with status 3", for the error result.
    what: String,
    started: bool,
    signal: Option<i32>,
    timed_out: bool,
}

impl OrchestratorEnd {
    fn not_started(code: i32, what: String) -> Self {
        OrchestratorEnd { code, what, started: false, signal: None, timed_out: false }
    }
}

/// Supervises the command and ends the run; returns the exit code.
pub async fn run(ipc: &Ipc, args: RunArgs) -> i32 {
    if let Err(err) = ipc.ensure_dirs() {
        eprintln!("sidecar-ipc: {err}");
    }
    // A result already there (a re-used folder) only counts as the orchestrator's if it is written anew.
    let before = FileVersion::of(&ipc.run_result());
    // SIGHUP too: its default action would end us before `/ipc/done`.
    let mut signals = match StopSignals::install() {
        Ok(signals) => Some(signals),
        Err(err) => {
            eprintln!("sidecar-ipc: cannot install signal handlers ({err}); SIGTERM will not be passed on");
            None
        }
    };
    let ended = match run_config::normalize(std::env::var_os(run_config::VAR).as_deref()) {
        Ok(config) => supervise(ipc, &args, &config, signals.as_mut()).await,
        Err(err) => OrchestratorEnd::not_started(1, format!("the orchestrator was not started: {err}")),
    };

    let pending = tokio::select! {
        pending = inflight::wait_answered(ipc, args.drain) => pending,
        signal = next_stop_signal(signals.as_mut()) => {
            eprintln!("sidecar-ipc: {signal} while waiting for prompts to be answered; ending the run now");
            inflight::unanswered(ipc)
        }
    };
    if !pending.is_empty() {
        eprintln!(
            "sidecar-ipc: prompts still unanswered after {}s, ending the run anyway: {}",
            args.drain.as_secs_f64(),
            pending.join(", ")
        );
    }
    keep_or_replace_run_result(ipc, before, &ended);
    if let Err(err) = finish::write_done(ipc) {
        eprintln!("sidecar-ipc: {err}: the agent will not see the end of the run");
        return if ended.code == 0 { 1 } else { ended.code };
    }
    ended.code
}

/// Keeps the orchestrator's own valid run result, or writes an error result saying how it ended.
fn keep_or_replace_run_result(ipc: &Ipc, before: Option<FileVersion>, ended: &OrchestratorEnd) {
    let now = FileVersion::of(&ipc.run_result());
    let own = now.is_some() && now != before;
    let message = match (own, finish::check_run_result(ipc)) {
        (true, Some(Ok(()))) => return,
        (true, Some(Err(err))) => format!("{}, and its run result {err}", ended.what),
        _ if !ended.started => ended.what.clone(),
        _ => format!("{} without writing a run result", ended.what),
    };
    eprintln!("sidecar-ipc: {message}");
    let mut value = finish::error_result(&message, ended.code);
    if let Some(signal) = ended.signal {
        value["signal"] = json!(signal_name(signal));
    }
    if ended.timed_out {
        value["timedOut"] = json!(true);
    }
    if let Err(err) = finish::write_run_result(ipc, &value) {
        eprintln!("sidecar-ipc: {err}");
    }
}

/// What ended the wait for the orchestrator.
enum WaitEnded {
    Exited(std::io::Result<std::process::ExitStatus>),
    Signal(Signal),
    Timeout,
}

async fn supervise(ipc: &Ipc, args: &RunArgs, config: &str, signals: Option<&mut StopSignals>) -> OrchestratorEnd {
    if let Err(err) = group::become_subreaper() {
        eprintln!("sidecar-ipc: cannot become child subreaper ({err}); leftover processes are reaped by PID 1");
    }
    let Some((program, rest)) = args.command.split_first() else {
        return OrchestratorEnd::not_started(2, "no command to run: sidecar-ipc run -- CMD [ARGS…]".to_owned());
    };
    let mut command = tokio::process::Command::new(program);
    command.args(rest).env(run_config::VAR, config).env(ipc::ROOT_VAR, ipc.root()).env(SUPERVISED_VAR, "1");
    let mut leader = match group::spawn_leader(&mut command) {
        Ok(leader) => leader,
        Err(err) => {
            // The shell's codes: 127 not found, 126 found but not runnable.
            let code = if err.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            return OrchestratorEnd::not_started(code, format!("cannot start the orchestrator {program:?}: {err}"));
        }
    };
    // The orchestrator is our only child, so what else we adopt (descendants that left its group and exited) can be
    // reaped without taking its status from tokio.
    tokio::spawn(group::reap_adopted_forever());
    let pgid = leader.pgid();
    let timeout_at = args.timeout.map(|timeout| Instant::now() + timeout);

    let ended = tokio::select! {
        status = leader.wait() => WaitEnded::Exited(status),
        signal = next_stop_signal(signals) => WaitEnded::Signal(signal),
        () = sleep_until_some(timeout_at) => WaitEnded::Timeout,
    };
    // Whatever the orchestrator does with the signal, its group has `--grace` to end; and whatever the leader left
    // in its group goes too: a background `sidecar-ipc prompt` has nobody to answer to.
    let (status, received, timed_out) = match ended {
        WaitEnded::Exited(status) => {
            if !group::term_then_kill(&mut pgid.clone(), args.grace).await {
                eprintln!("sidecar-ipc: process group {pgid} still has members after SIGKILL; not waiting for them");
            }
            (status, None, false)
        }
        WaitEnded::Signal(signal) => {
            (group::signal_then_kill_group(&mut leader, signal, args.grace).await, Some(signal), false)
        }
        WaitEnded::Timeout => (group::term_then_kill_group(&mut leader, args.grace).await, None, true),
    };

    let (code, signal) = match status {
        Ok(status) => exit_code_of(status),
        Err(err) => {
            return OrchestratorEnd { code: 1, what: format!("cannot wait for the orchestrator: {err}"), ..started() }
        }
    };
    let mut what = match signal {
        _ if timed_out => format!(
            "the orchestrator timed out after {}s and was stopped",
            args.timeout.unwrap_or_default().as_secs_f64()
        ),
        Some(signal) => format!("the orchestrator was killed by signal {signal} ({})", signal_name(signal)),
        None => format!("the orchestrator exited with status {code}"),
    };
    if let Some(received) = received {
        what = format!("sidecar-ipc run received {received} and passed it on; {what}");
    }
    OrchestratorEnd { code: if timed_out { TIMED_OUT } else { code }, what, started: true, signal, timed_out }
}

fn started() -> OrchestratorEnd {
    OrchestratorEnd { code: 1, what: String::new(), started: true, signal: None, timed_out: false }
}

fn signal_name(signal: i32) -> &'static str {
    Signal::try_from(signal).map(Signal::as_str).unwrap_or("unknown signal")
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_have_names() {
        assert_eq!(signal_name(15), "SIGTERM");
    }
}
