//! The replay backend: canned answers from a JSON-lines file, for deterministic runs and tests.
//!
//! Each line is one answer, used once: `{"content": "text"}`, `{"parsed": {…}}` (sent as its compact JSON text) or
//! `{"error": "message"}`, optionally with `"match": "substring"` and `"metrics": {"inputTokens", "outputTokens"}`.
//! For each prompt, the first unused answer whose `match` occurs in the prompt wins; otherwise the first unused
//! answer without `match`, in file order. A prompt-server audit file replays as it is: its `result` lines are the
//! answers in order, its other lines are skipped. Blank lines are skipped.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Reply;
use crate::wire::TokenUsage;

/// Why a `--replay` file cannot be used: a usage error, found at start.
#[derive(Debug)]
pub enum ReplayFileError {
    Read { path: PathBuf, source: io::Error },
    Line { path: PathBuf, line: usize, problem: LineProblem },
}

/// What is wrong with one line of a replay file.
#[derive(Debug)]
pub enum LineProblem {
    NotJson(serde_json::Error),
    NotObject,
    /// None of `content`, `parsed`, `error`.
    NoAnswer,
    /// `match` is there but not a non-empty string.
    BadMatch,
    BadMetrics(serde_json::Error),
}

/// Why the replay gave a prompt no text; the prompt gets it as its error result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// Every answer that could be given was used.
    NoAnswerLeft { path: PathBuf, used: usize, total: usize },
    /// The answer found is an error (`{"error": …}`, or an error result of an audit file), on `line`.
    Canned { error: String, line: usize },
}

impl fmt::Display for ReplayFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayFileError::Read { path, source } => {
                write!(f, "--replay {}: cannot read it: {source}", path.display())
            }
            ReplayFileError::Line { path, line, problem } => {
                write!(f, "--replay {} line {line}: {problem}", path.display())
            }
        }
    }
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::NotJson(err) => write!(f, "not JSON ({err})"),
            LineProblem::NotObject => f.write_str("not a JSON object"),
            LineProblem::NoAnswer => f.write_str("an answer needs \"content\", \"parsed\" or \"error\""),
            LineProblem::BadMatch => f.write_str("\"match\" must be a non-empty string"),
            LineProblem::BadMetrics(err) => write!(f, "\"metrics\" is not {{inputTokens, outputTokens}}: {err}"),
        }
    }
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::NoAnswerLeft { path, used, total } => write!(
                f,
                "replay {}: no answer left for this prompt ({used} of {total} used); add a line, or one with a \
                 \"match\" substring of the prompt",
                path.display()
            ),
            ReplayError::Canned { error, line } => write!(f, "{error} (replay line {line})"),
        }
    }
}

impl std::error::Error for ReplayFileError {}
impl std::error::Error for ReplayError {}

pub struct Replay {
    path: PathBuf,
    answers: Vec<Canned>,
}

#[derive(Debug)]
struct Canned {
    line: usize,
    pattern: Option<String>,
    reply: CannedReply,
    metrics: TokenUsage,
    used: bool,
}

/// What a canned answer makes the backend do.
#[derive(Debug)]
enum CannedReply {
    /// Answer with the model's text.
    Text(String),
    /// Fail with this error.
    Error(String),
}

impl Replay {
    pub fn load(path: &Path) -> Result<Self, ReplayFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ReplayFileError::Read { path: path.to_path_buf(), source })?;
        let mut answers = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let problem = |problem| ReplayFileError::Line { path: path.to_path_buf(), line: index + 1, problem };
            let value: Value = serde_json::from_str(line).map_err(|err| problem(LineProblem::NotJson(err)))?;
            answers.extend(parse_line(value, index + 1).map_err(problem)?);
        }
        Ok(Replay { path: path.to_path_buf(), answers })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn count(&self) -> usize {
        self.answers.len()
    }

    pub fn unused(&self) -> usize {
        self.answers.iter().filter(|answer| !answer.used).count()
    }

    pub fn answer(&mut self, prompt: &str) -> Result<Reply, ReplayError> {
        let by_match = self.answers.iter().position(|answer| {
            !answer.used && answer.pattern.as_deref().is_some_and(|pattern| prompt.contains(pattern))
        });
        let in_order = || self.answers.iter().position(|answer| !answer.used && answer.pattern.is_none());
        let Some(index) = by_match.or_else(in_order) else {
            let total = self.answers.len();
            return Err(ReplayError::NoAnswerLeft { path: self.path.clone(), used: total - self.unused(), total });
        };
        let answer = &mut self.answers[index];
        answer.used = true;
        let metrics = answer.metrics;
        match &answer.reply {
            CannedReply::Text(text) => Ok(Reply { text: text.clone(), metrics }),
            CannedReply::Error(error) => Err(ReplayError::Canned { error: error.clone(), line: answer.line }),
        }
    }
}

fn parse_line(value: Value, line: usize) -> Result<Option<Canned>, LineProblem> {
    let Value::Object(object) = value else { return Err(LineProblem::NotObject) };
    let from_audit = match object.get("event").and_then(Value::as_str) {
        Some("result") => true,
        Some(_) => return Ok(None),
        None => false,
    };
    let text = |object: &Map<String, Value>| -> Option<String> {
        match (object.get("content").and_then(Value::as_str), object.get("parsed")) {
            (Some(content), _) => Some(content.to_owned()),
            (None, Some(parsed)) if !parsed.is_null() => Some(parsed.to_string()),
            _ => None,
        }
    };
    let error = object.get("error").and_then(Value::as_str).map(str::to_owned);
    let reply = if from_audit {
        match object.get("status").and_then(Value::as_str) {
            Some("success") => CannedReply::Text(text(&object).unwrap_or_default()),
            _ => CannedReply::Error(error.unwrap_or_else(|| "error".to_owned())),
        }
    } else {
        match (error, text(&object)) {
            (Some(error), _) => CannedReply::Error(error),
            (None, Some(text)) => CannedReply::Text(text),
            (None, None) => return Err(LineProblem::NoAnswer),
        }
    };
    let pattern = match object.get("match") {
        None | Some(Value::Null) => None,
        Some(Value::String(pattern)) if !pattern.is_empty() => Some(pattern.clone()),
        Some(_) => return Err(LineProblem::BadMatch),
    };
    let metrics = match object.get("metrics") {
        Some(metrics) => serde_json::from_value(metrics.clone()).map_err(LineProblem::BadMetrics)?,
        None => TokenUsage::default(),
    };
    Ok(Some(Canned { line, pattern, reply, metrics, used: false }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(lines: &str) -> Replay {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answers.jsonl");
        std::fs::write(&path, lines).unwrap();
        Replay::load(&path).unwrap()
    }

    #[test]
    fn matches_win_then_file_order() {
        let mut replay =
            replay("{\"content\": \"first\"}\n\n{\"match\": \"cat\", \"parsed\": {\"a\": 1}}\n{\"error\": \"nope\"}\n");
        assert_eq!(replay.answer("a cat").unwrap().text, "{\"a\":1}");
        assert_eq!(replay.answer("a cat").unwrap().text, "first");
        assert_eq!(replay.answer("x").unwrap_err(), ReplayError::Canned { error: "nope".into(), line: 4 });
        let err = replay.answer("x").unwrap_err();
        assert!(matches!(err, ReplayError::NoAnswerLeft { used: 3, total: 3, .. }), "{err:?}");
        assert!(err.to_string().contains("no answer left"), "{err}");
    }

    #[test]
    fn an_audit_file_replays_its_results() {
        let mut replay = replay(concat!(
            "{\"event\": \"start\"}\n",
            "{\"event\": \"request\", \"prompt\": \"p\"}\n",
            "{\"event\": \"result\", \"status\": \"success\", \"content\": \"{\\\"a\\\":1}\", \"parsed\": {\"a\": 1}, ",
            "\"metrics\": {\"inputTokens\": 5, \"outputTokens\": 2}}\n",
            "{\"event\": \"result\", \"status\": \"error\", \"error\": \"overloaded\"}\n",
        ));
        assert_eq!(replay.count(), 2);
        let reply = replay.answer("p").unwrap();
        assert_eq!((reply.text.as_str(), reply.metrics.input_tokens), ("{\"a\":1}", 5));
        assert!(replay.answer("p").unwrap_err().to_string().starts_with("overloaded"));
    }

    #[test]
    fn bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answers.jsonl");
        std::fs::write(&path, "{\"content\": \"ok\"}\n{\"match\": \"x\"}\n").unwrap();
        let err = Replay::load(&path).err().unwrap();
        assert!(matches!(err, ReplayFileError::Line { line: 2, problem: LineProblem::NoAnswer, .. }), "{err:?}");
        assert!(err.to_string().ends_with("line 2: an answer needs \"content\", \"parsed\" or \"error\""), "{err}");
    }
}
