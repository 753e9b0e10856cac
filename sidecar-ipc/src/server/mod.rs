//! `sidecar-ipc prompt-server`: the agent's side of the protocol, to run orchestrators without a cluster. Like the
//! agent-runner in prompt-server mode it answers `prompts/request-*.json` one at a time, applies
//! `context/clear-*.json`, and stops when `/ipc/done` appears, printing the run result. Unlike it, it reads files
//! that are still being written again later, answers a broken request with an error result instead of dropping it,
//! skips requests that already have a result (a restart), handles requests and clears in the order they were
//! written, validates answers against the request's schema, and writes its results atomically.

mod audit;
mod history;
mod openai;
mod replay;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_files::{DocumentError, Reading, UnfinishedWrite, UnfinishedWrites, Verdict};
use process_group::StopSignals;
use serde_json::{json, Value};

use crate::changes::Changes;
use crate::exit::ExitError;
use crate::ipc::{self, Ipc};
use crate::schema::{self, SchemaSpec};
use crate::wire::{ClearContextRequest, PromptRequest, PromptResult, TokenUsage, ERROR};
use audit::Audit;
use history::History;

pub struct ServerArgs {
    pub backend: BackendArgs,
    pub audit: Option<PathBuf>,
    pub system: Option<String>,
    /// `USE_CONTEXT` as found in the environment.
    pub use_context: Option<String>,
}

pub enum BackendArgs {
    OpenAi { url: String, model: String, key_var: String, timeout: Duration },
    Replay(PathBuf),
}

/// What a backend answered: the model's text and what it cost.
#[derive(Debug)]
pub struct Reply {
    pub text: String,
    pub metrics: TokenUsage,
}

enum Backend {
    OpenAi(openai::OpenAi),
    Replay(replay::Replay),
}

/// Why a backend gave no text for a prompt: the prompt's error result says it.
#[derive(Debug)]
enum BackendError {
    OpenAi(openai::CompletionError),
    Replay(replay::ReplayError),
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::OpenAi(err) => err.fmt(f),
            BackendError::Replay(err) => err.fmt(f),
        }
    }
}

impl Backend {
    async fn complete(
        &mut self,
        messages: &[history::Message],
        prompt: &str,
        schema: Option<&SchemaSpec>,
    ) -> Result<Reply, BackendError> {
        match self {
            Backend::OpenAi(backend) => backend.complete(messages, schema).await.map_err(BackendError::OpenAi),
            Backend::Replay(backend) => backend.answer(prompt).map_err(BackendError::Replay),
        }
    }

    fn describe(&self) -> Value {
        match self {
            Backend::OpenAi(backend) => json!({"backend": "openai", "url": backend.url(), "model": backend.model()}),
            Backend::Replay(backend) => {
                json!({"backend": "replay", "replay": backend.path(), "answers": backend.count()})
            }
        }
    }
}

/// Serves until `/ipc/done` (exit 0 with the run result on stdout; 1 if it is missing or unreadable) or until
/// SIGTERM, SIGINT or SIGHUP (exit 0).
pub async fn serve(ipc: &Ipc, args: ServerArgs) -> Result<(), ExitError> {
    ipc.ensure_dirs()?;
    let audit = Audit::open(args.audit.as_deref()).map_err(ExitError::usage)?;
    let backend = match args.backend {
        BackendArgs::OpenAi { url, model, key_var, timeout } => {
            Backend::OpenAi(openai::OpenAi::new(&url, &model, &key_var, timeout).map_err(ExitError::usage)?)
        }
        BackendArgs::Replay(path) => Backend::Replay(replay::Replay::load(&path).map_err(ExitError::usage)?),
    };
    let history = History::new(history::use_context_from(args.use_context.as_deref()), args.system);
    let Ok(mut signals) = StopSignals::install() else {
        return Err(ExitError::failed("cannot install signal handlers"));
    };
    let mut server = PromptServer {
        ipc: ipc.clone(),
        audit,
        backend,
        history,
        seen: HashSet::new(),
        unfinished: UnfinishedWrites::default(),
    };
    let mut start = server.backend.describe();
    start["useContext"] = json!(server.history.use_context());
    start["ipcRoot"] = json!(ipc.root());
    server.audit.log("start", start);
    let stopped_by = tokio::select! {
        ended = server.serve() => return ended,
        signal = signals.recv() => signal,
    };
    server.audit.log("stop", json!({"signal": stopped_by.as_str()}));
    Ok(())
}

struct PromptServer {
    ipc: Ipc,
    audit: Audit,
    backend: Backend,
    history: History,
    /// Files handled (or given up on) for good.
    seen: HashSet<PathBuf>,
    /// Files that are not usable yet, to tell "still being written" from "broken".
    unfinished: UnfinishedWrites<PathBuf>,
}

/// What a file waiting to be handled is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum PendingKind {
    // A clear written in the same instant as a request comes first: an orchestrator clears, then asks.
    Clear,
    Request,
}

/// A request or clear not handled yet.
struct PendingFile {
    path: PathBuf,
    name: String,
    kind: PendingKind,
}

impl PromptServer {
    async fn serve(&mut self) -> Result<(), ExitError> {
        // Watch first, then look: nothing written in between is missed.
        let mut changes = Changes::watch(&[self.ipc.prompts(), self.ipc.context(), self.ipc.root().to_path_buf()]);
        loop {
            if self.ipc.is_done() {
                return self.end_of_run(&mut changes).await;
            }
            for file in self.pending() {
                if self.ipc.is_done() {
                    break;
                }
                self.handle(file).await;
            }
            // A file still being written is judged when its quiet period ends, if no change comes first.
            changes.wait(self.unfinished.next_verdict()).await;
        }
    }

    /// New requests and clears, in the order they were written (modification time, then name).
    fn pending(&mut self) -> Vec<PendingFile> {
        let mut found = Vec::new();
        for (dir, kind) in [(self.ipc.prompts(), PendingKind::Request), (self.ipc.context(), PendingKind::Clear)] {
            for name in ipc::file_names(&dir) {
                let wanted = match kind {
                    PendingKind::Request => ipc::is_request_name(&name),
                    PendingKind::Clear => ipc::is_clear_name(&name),
                };
                let path = dir.join(&name);
                if !wanted || self.seen.contains(&path) {
                    continue;
                }
                if let Some(id) = ipc::request_id(&name).filter(|_| kind == PendingKind::Request) {
                    if self.ipc.result(id).exists() {
                        self.seen.insert(path);
                        continue;
                    }
                }
                // The entry itself, not what a symlink points to: a link is read (and refused) like any file.
                let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
                found.push((meta.modified().ok(), kind, PendingFile { path, name, kind }));
            }
        }
        found.sort_by(|a, b| (a.0, a.1, &a.2.name).cmp(&(b.0, b.1, &b.2.name)));
        // A file still being written that is gone, or was answered by someone else, is waited for no more.
        self.unfinished.retain(|path| found.iter().any(|(_, _, file)| &file.path == path));
        found.into_iter().map(|(_, _, file)| file).collect()
    }

    async fn handle(&mut self, file: PendingFile) {
        match file.kind {
            PendingKind::Request => {
                if let Some(request) = self.read::<PromptRequest>(&file) {
                    self.answer(request, &file).await;
                }
            }
            PendingKind::Clear => {
                if let Some(clear) = self.read::<ClearContextRequest>(&file) {
                    self.history.clear();
                    self.audit.log("clear", json!({"requestId": clear.request_id, "reason": clear.reason}));
                }
            }
        }
    }

    /// The file's content once complete; `None` while it may still be written, or when it is broken (then logged,
    /// and a broken request gets an error result so that its orchestrator does not wait for a timeout).
    fn read<T: serde::de::DeserializeOwned>(&mut self, file: &PendingFile) -> Option<T> {
        let error: DocumentError = match ipc::read_json::<T>(&file.path) {
            Reading::Ready { value, .. } => {
                self.seen.insert(file.path.clone());
                self.unfinished.forget(&file.path);
                return Some(value);
            }
            Reading::Missing => {
                self.seen.insert(file.path.clone());
                self.unfinished.forget(&file.path);
                return None;
            }
            Reading::Incomplete { why, version } => match self.unfinished.judge(file.path.clone(), version) {
                Verdict::Wait { .. } => return None,
                Verdict::Abandoned => why.into(),
            },
            Reading::Unusable(why) => why.into(),
        };
        self.seen.insert(file.path.clone());
        self.unfinished.forget(&file.path);
        let error = format!("it {error}");
        self.audit.log("invalid", json!({"file": file.path, "error": error}));
        if let Some(id) =
            ipc::request_id(&file.name).filter(|id| file.kind == PendingKind::Request && ipc::is_safe_id(id))
        {
            let result = PromptResult::error(id, format!("the request file {} is unusable: {error}", file.name));
            self.write_result(&result, Duration::ZERO);
        }
        None
    }

    async fn answer(&mut self, request: PromptRequest, file: &PendingFile) {
        // The result is named after the request's own id, as the agent-runner names it; an id that is not a plain
        // name, or too long for a result name, falls back to the one in the file name (which always fits).
        let id = if ipc::is_safe_id(&request.request_id) {
            request.request_id.clone()
        } else if let Some(id) = ipc::request_id(&file.name).filter(|id| ipc::is_safe_id(id)) {
            id.to_owned()
        } else {
            self.audit.log("invalid", json!({"file": file.path, "error": "no usable requestId"}));
            return;
        };
        self.audit.log(
            "request",
            json!({"requestId": id, "prompt": request.prompt, "schema": request.schema,
                   "history": self.history.earlier_messages()}),
        );
        let started = Instant::now();
        let result = self.result_for(&id, &request).await;
        self.write_result(&result, started.elapsed());
    }

    async fn result_for(&mut self, id: &str, request: &PromptRequest) -> PromptResult {
        if request.prompt.trim().is_empty() {
            return PromptResult::error(id, "prompt is empty");
        }
        let schema = match request.schema.as_ref().map(SchemaSpec::from_value).transpose() {
            Ok(schema) => schema.flatten(),
            Err(err) => return PromptResult::error(id, format!("the request's schema is unusable: {err}")),
        };
        let validator = match schema.as_ref().map(SchemaSpec::validator).transpose() {
            Ok(validator) => validator,
            Err(err) => return PromptResult::error(id, format!("the request's schema is unusable: {err}")),
        };
        let messages = self.history.messages_for(&request.prompt);
        let reply = match self.backend.complete(&messages, &request.prompt, schema.as_ref()).await {
            Ok(reply) => reply,
            Err(err) => return PromptResult::error(id, err.to_string()),
        };
        // The model did say it, valid or not: it stays in the history, as in the agent-runner.
        self.history.record(&request.prompt, &reply.text);
        let mut result = PromptResult {
            request_id: id.to_owned(),
            status: crate::wire::SUCCESS.to_owned(),
            content: Some(reply.text.clone()).filter(|text| !text.is_empty()),
            parsed: None,
            error: None,
            metrics: reply.metrics,
        };
        if let Some(validator) = validator {
            match schema::checked_answer(&validator, &reply.text) {
                Ok(parsed) => result.parsed = Some(parsed),
                Err(err) => {
                    result.status = ERROR.to_owned();
                    result.error = Some(err.to_string());
                }
            }
        }
        result
    }

    fn write_result(&mut self, result: &PromptResult, took: Duration) {
        let written = ipc::write_json(&self.ipc.result(&result.request_id), result);
        let mut line = serde_json::to_value(result).unwrap_or_default();
        line["ms"] = json!(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
        if let Err(err) = written {
            line["writeError"] = json!(err.to_string());
        }
        self.audit.log("result", line);
    }

    /// `/ipc/done` is there: print the run result and stop.
    async fn end_of_run(&mut self, changes: &mut Changes) -> Result<(), ExitError> {
        let path = self.ipc.run_result();
        let mut unfinished = UnfinishedWrite::default();
        let unused = match &self.backend {
            Backend::Replay(replay) => json!(replay.unused()),
            Backend::OpenAi(_) => Value::Null,
        };
        loop {
            // Written before done, but perhaps not atomically: a late writer has until it stops writing.
            let problem = match ipc::read_json::<Value>(&path) {
                Reading::Ready { value, .. } => {
                    self.audit.log("done", json!({"runResult": value, "unusedReplayAnswers": unused}));
                    println!("{value}");
                    return Ok(());
                }
                Reading::Missing => {
                    format!("{} appeared but there is no run result at {}", done(&self.ipc), path.display())
                }
                Reading::Incomplete { why, version } => match unfinished.judge(version) {
                    Verdict::Wait { until } => {
                        changes.wait(Some(until)).await;
                        continue;
                    }
                    Verdict::Abandoned => format!("the run result {} is unreadable: it {why}", path.display()),
                },
                Reading::Unusable(why) => format!("the run result {} is unreadable: it {why}", path.display()),
            };
            self.audit.log("done", json!({"error": problem}));
            return Err(ExitError::failed(problem));
        }
    }
}

fn done(ipc: &Ipc) -> String {
    ipc.done().display().to_string()
}
