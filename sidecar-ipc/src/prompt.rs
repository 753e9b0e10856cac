//! `sidecar-ipc prompt`: one LLM call through the agent, answer on stdout.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use agent_files::{DocumentError, Reading, UnfinishedWrite, Verdict};
use serde_json::Value;

use crate::changes::Changes;
use crate::exit::ExitError;
use crate::ids::new_id;
use crate::ipc::{self, Ipc};
use crate::json_arg;
use crate::schema::{self, AnswerError, SchemaSpec};
use crate::wire::{PromptRequest, PromptResult};

pub struct PromptArgs {
    pub text: Option<String>,
    pub schema: Option<String>,
    pub timeout: Duration,
}

/// How the wait for a result ended.
enum Waited {
    Answered(PromptResult),
    Unreadable(DocumentError),
    RunEnded,
    TimedOut,
}

/// Writes the request, waits for its result, prints the answer. Exit 0, 1 (error answer, unreadable result, run
/// ended first), 2 (bad arguments) or 124 (no result in time).
pub async fn prompt(ipc: &Ipc, args: PromptArgs) -> Result<(), ExitError> {
    let text = prompt_text(args.text)?;
    let schema = match &args.schema {
        Some(value) => {
            let value = json_arg::load("--schema", value).map_err(ExitError::usage)?;
            let spec = SchemaSpec::from_value(&value)
                .map_err(|err| ExitError::usage(format!("--schema: {err}")))?
                .ok_or_else(|| ExitError::usage("--schema: the schema is empty"))?;
            let validator = spec.validator().map_err(|err| ExitError::usage(format!("--schema: {err}")))?;
            Some((spec, validator))
        }
        None => None,
    };
    ipc.ensure_dirs()?;
    if ipc.is_done() {
        return Err(ExitError::failed(format!(
            "the run has already ended ({} exists): no agent is answering prompts any more",
            ipc.done().display()
        )));
    }

    let id = new_id();
    // Watch before writing: a result written before the first check still wakes the wait.
    let mut changes = Changes::watch(&[ipc.prompts(), ipc.root().to_path_buf()]);
    let request = PromptRequest {
        request_id: id.clone(),
        prompt: text,
        schema: schema.as_ref().map(|(s, _)| s.to_request_field()),
    };
    ipc::write_json(&ipc.request(&id), &request)?;

    let deadline = Instant::now() + args.timeout;
    let result = match wait_for_result(ipc, &id, deadline, &mut changes).await {
        Waited::Answered(result) => result,
        Waited::Unreadable(error) => {
            return Err(ExitError::failed(format!("the result of prompt {id} is unreadable: it {error}")));
        }
        Waited::RunEnded => {
            return Err(ExitError::failed(format!(
                "the run ended ({} appeared) before prompt {id} was answered",
                ipc.done().display()
            )));
        }
        Waited::TimedOut => {
            return Err(ExitError::TimedOut(format!(
                "no result for prompt {id} after {}s: is an agent (agent-runner in prompt-server mode, or \
                 `sidecar-ipc prompt-server`) watching {}?",
                args.timeout.as_secs_f64(),
                ipc.prompts().display()
            )));
        }
    };
    if !result.is_success() {
        let error = result.error.as_deref().filter(|e| !e.is_empty()).unwrap_or("(no error message)");
        return Err(ExitError::failed(format!("the agent answered prompt {id} with an error: {error}")));
    }
    let answer = match &schema {
        Some((_, validator)) => {
            // The agent-runner only checks that the answer is JSON; the schema is checked here.
            let parsed = parsed_answer(&result)
                .and_then(|parsed| schema::check(validator, &parsed).map(|()| parsed).map_err(AnswerError::from))
                .map_err(|err| ExitError::failed(format!("prompt {id}: {err}")))?;
            let mut line = parsed.to_string();
            line.push('\n');
            line
        }
        None => {
            let mut content = result.content.unwrap_or_default();
            if !content.ends_with('\n') {
                content.push('\n');
            }
            content
        }
    };
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (`| head -c1`) is the reader's choice, not our failure.
    let _ = stdout.write_all(answer.as_bytes()).and_then(|()| stdout.flush());
    Ok(())
}

fn prompt_text(text: Option<String>) -> Result<String, ExitError> {
    let text = match text.as_deref() {
        Some("-") | None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|err| ExitError::usage(format!("cannot read the prompt from stdin: {err}")))?;
            text
        }
        Some(text) => text.to_owned(),
    };
    if text.trim().is_empty() {
        return Err(ExitError::usage("the prompt is empty: pass it as an argument, or on stdin with `-`"));
    }
    Ok(text)
}

/// `parsed`, or the content read as JSON when an agent left `parsed` out.
fn parsed_answer(result: &PromptResult) -> Result<Value, AnswerError> {
    match &result.parsed {
        Some(parsed) => Ok(parsed.clone()),
        None => schema::parse_answer(result.content.as_deref().unwrap_or_default()),
    }
}

async fn wait_for_result(ipc: &Ipc, id: &str, deadline: Instant, changes: &mut Changes) -> Waited {
    let path = ipc.result(id);
    let mut unfinished = UnfinishedWrite::default();
    loop {
        let mut wake_by = deadline;
        match ipc::read_json::<PromptResult>(&path) {
            Reading::Ready { value, .. } => return Waited::Answered(value),
            Reading::Unusable(why) => return Waited::Unreadable(why.into()),
            // Written in place by the agent: read again when it changes, unless it has stopped changing.
            Reading::Incomplete { why, version } => match unfinished.judge(version) {
                Verdict::Wait { .. } if Instant::now() >= deadline => return Waited::Unreadable(why.into()),
                Verdict::Wait { until } => wake_by = wake_by.min(until),
                Verdict::Abandoned => return Waited::Unreadable(why.into()),
            },
            Reading::Missing if ipc.is_done() => return Waited::RunEnded,
            Reading::Missing if Instant::now() >= deadline => return Waited::TimedOut,
            Reading::Missing => {}
        }
        changes.wait(Some(wake_by)).await;
    }
}
