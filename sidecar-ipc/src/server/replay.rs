//! The replay backend: canned answers from a JSON-lines file, for deterministic runs and tests.
//!
//! Each line is one answer, used once: `{"content": "text"}`, `{"parsed": {…}}` (sent as its compact JSON text) or
//! `{"error": "message"}`, optionally with `"match": "substring"` and `"metrics": {"inputTokens", "outputTokens"}`.
//! For each prompt, the first unused answer whose `match` occurs in the prompt wins; otherwise the first unused
//! answer without `match`, in file order. A prompt-server audit file replays as it is: its `result` lines are the
//! answers in order, its other lines are skipped. Blank lines are skipped.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Reply;
use crate::wire::Metrics;

pub struct Replay {
    path: PathBuf,
    answers: Vec<Canned>,
}

#[derive(Debug)]
struct Canned {
    line: usize,
    pattern: Option<String>,
    /// The model's text, or the error the backend reports.
    outcome: Result<String, String>,
    metrics: Metrics,
    used: bool,
}

impl Replay {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("--replay {}: cannot read it: {err}", path.display()))?;
        let mut answers = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line)
                .map_err(|err| format!("--replay {} line {}: not JSON ({err})", path.display(), index + 1))?;
            let canned = parse_line(value, index + 1)
                .map_err(|err| format!("--replay {} line {}: {err}", path.display(), index + 1))?;
            answers.extend(canned);
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

    pub fn answer(&mut self, prompt: &str) -> Result<Reply, String> {
        let by_match = self.answers.iter().position(|answer| {
            !answer.used && answer.pattern.as_deref().is_some_and(|pattern| prompt.contains(pattern))
        });
        let in_order = || self.answers.iter().position(|answer| !answer.used && answer.pattern.is_none());
        let Some(index) = by_match.or_else(in_order) else {
            return Err(format!(
                "replay {}: no answer left for this prompt ({} of {} used); add a line, or one with a \"match\" \
                 substring of the prompt",
                self.path.display(),
                self.answers.len() - self.unused(),
                self.answers.len()
            ));
        };
        let answer = &mut self.answers[index];
        answer.used = true;
        let metrics = answer.metrics;
        match &answer.outcome {
            Ok(text) => Ok(Reply { text: text.clone(), metrics }),
            Err(error) => Err(format!("{error} (replay line {})", answer.line)),
        }
    }
}

fn parse_line(value: Value, line: usize) -> Result<Option<Canned>, String> {
    let Value::Object(object) = value else { return Err("not a JSON object".to_owned()) };
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
    let outcome = if from_audit {
        match object.get("status").and_then(Value::as_str) {
            Some("success") => Ok(text(&object).unwrap_or_default()),
            _ => Err(error.unwrap_or_else(|| "error".to_owned())),
        }
    } else {
        match (error, text(&object)) {
            (Some(error), _) => Err(error),
            (None, Some(text)) => Ok(text),
            (None, None) => return Err("an answer needs \"content\", \"parsed\" or \"error\"".to_owned()),
        }
    };
    let pattern = match object.get("match") {
        None | Some(Value::Null) => None,
        Some(Value::String(pattern)) if !pattern.is_empty() => Some(pattern.clone()),
        Some(_) => return Err("\"match\" must be a non-empty string".to_owned()),
    };
    let metrics = match object.get("metrics") {
        Some(metrics) => serde_json::from_value(metrics.clone())
            .map_err(|err| format!("\"metrics\" is not {{inputTokens, outputTokens}}: {err}"))?,
        None => Metrics::default(),
    };
    Ok(Some(Canned { line, pattern, outcome, metrics, used: false }))
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
        assert!(replay.answer("x").unwrap_err().starts_with("nope (replay line 4)"));
        assert!(replay.answer("x").unwrap_err().contains("no answer left"));
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
        assert!(replay.answer("p").unwrap_err().starts_with("overloaded"));
    }

    #[test]
    fn bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answers.jsonl");
        std::fs::write(&path, "{\"content\": \"ok\"}\n{\"match\": \"x\"}\n").unwrap();
        let err = Replay::load(&path).err().unwrap();
        assert!(err.ends_with("line 2: an answer needs \"content\", \"parsed\" or \"error\""), "{err}");
    }
}
