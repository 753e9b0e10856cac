//! The prompt server's log: one JSON object per line on stderr, also appended to `--audit FILE`. Every prompt and
//! every result is in it, and `--replay` reads its `result` lines back as canned answers, in order.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

pub struct Audit {
    file: Option<File>,
}

/// The `--audit` file cannot be opened for appending: a usage error, found at start.
#[derive(Debug)]
pub struct AuditError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--audit {}: cannot open it for appending: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for AuditError {}

impl Audit {
    pub fn open(path: Option<&Path>) -> Result<Self, AuditError> {
        let file = match path {
            Some(path) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| AuditError { path: path.to_path_buf(), source })?,
            ),
            None => None,
        };
        Ok(Audit { file })
    }

    /// Logs `{"ts": <ms since 1970>, "event": event, …fields}`.
    pub fn log(&mut self, event: &str, fields: Value) {
        let mut line = Map::new();
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_millis()).unwrap_or_default();
        line.insert("ts".to_owned(), Value::from(u64::try_from(ms).unwrap_or(u64::MAX)));
        line.insert("event".to_owned(), Value::from(event));
        if let Value::Object(fields) = fields {
            line.extend(fields);
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        // One write per line, so lines from a crash or a concurrent reader are never interleaved mid-line.
        let _ = io::stderr().lock().write_all(text.as_bytes());
        if let Some(file) = &mut self.file {
            if let Err(err) = file.write_all(text.as_bytes()) {
                eprintln!("sidecar-ipc: cannot append to the audit file: {err}");
            }
        }
    }
}
