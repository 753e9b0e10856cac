//! Ending a run: `/ipc/run-result.json`, then `/ipc/done`, in that order, always both. `sidecar-ipc finish` and the
//! supervisor (`run`) share this.

use std::time::Duration;

use agent_files::{DocumentError, Reading};
use serde_json::{json, Value};

use crate::exit::ExitError;
use crate::ipc::{self, FolderError, Ipc};
use crate::{inflight, json_arg};

/// Set by `run` for the orchestrator: `finish` then writes only the run result, and the supervisor writes
/// `/ipc/done` once the orchestrator's whole process group is gone, so nothing the orchestrator still runs can be
/// cut off by the end of the run.
pub const SUPERVISED_VAR: &str = "SIDECAR_IPC_SUPERVISED";

/// The run result written for an orchestrator that left none: `{"error", "phase": "orchestrator", "exitCode"}`.
pub fn error_result(error: &str, exit_code: i32) -> Value {
    json!({"error": error, "phase": "orchestrator", "exitCode": exit_code})
}

pub fn write_run_result(ipc: &Ipc, value: &Value) -> Result<(), FolderError> {
    ipc::create_dir(ipc.root())?;
    ipc::write_json(&ipc.run_result(), value)
}

/// The last file of a run.
pub fn write_done(ipc: &Ipc) -> Result<(), FolderError> {
    ipc::write_file(&ipc.done(), b"")
}

/// Whether the run result on disk is JSON (why not if not). Its writer is done by the time this is asked (the
/// orchestrator's group is gone, or it is `finish` itself), so a run result that is incomplete is final here.
pub fn check_run_result(ipc: &Ipc) -> Option<Result<(), DocumentError>> {
    match ipc::read_json::<Value>(&ipc.run_result()) {
        Reading::Missing => None,
        Reading::Ready { .. } => Some(Ok(())),
        Reading::Incomplete { why, .. } => Some(Err(why.into())),
        Reading::Unusable(why) => Some(Err(why.into())),
    }
}

/// `sidecar-ipc finish [--result FILE|JSON]`. Without `--result`, a run result already written is kept (and `{}`
/// written if there is none). A `--result` that cannot be read still ends the run, with an error result and exit 1:
/// a `finish` that stopped short of `/ipc/done` would leave the agent waiting forever.
pub async fn finish(ipc: &Ipc, result: Option<&str>, drain: Duration) -> Result<(), ExitError> {
    let mut failure = None;
    let value = match result.map(|arg| json_arg::load("--result", arg)) {
        Some(Ok(value)) => Some(value),
        Some(Err(err)) => {
            let value = error_result(&format!("sidecar-ipc finish: {err}"), 1);
            failure = Some(ExitError::failed(format!("{err}; wrote an error run result instead")));
            Some(value)
        }
        None => match check_run_result(ipc) {
            Some(Ok(())) => None,
            Some(Err(err)) => {
                let message = format!("the run result already written {err}");
                failure = Some(ExitError::failed(format!("{message}; replaced it with an error run result")));
                Some(error_result(&message, 1))
            }
            None => Some(json!({})),
        },
    };
    // Even when the result cannot be written, done is still tried: a run that never ends is the worse outcome.
    let written = value.map_or(Ok(()), |value| write_run_result(ipc, &value));
    if std::env::var_os(SUPERVISED_VAR).is_none_or(|v| v.is_empty()) {
        let pending = inflight::wait_answered(ipc, drain).await;
        if !pending.is_empty() {
            eprintln!("sidecar-ipc: ending the run with prompts still unanswered: {}", pending.join(", "));
        }
        write_done(ipc)?;
    }
    written?;
    failure.map_or(Ok(()), Err)
}
