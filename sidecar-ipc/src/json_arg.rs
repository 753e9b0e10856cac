//! `FILE|JSON` arguments: inline JSON when the value starts with `{` or `[`, `-` for stdin, otherwise a file path.

use std::fmt;
use std::io::{self, Read};

use serde_json::Value;

/// Where an argument's JSON came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Inline,
    Stdin,
    File(String),
}

/// Why a `FILE|JSON` argument could not be used; the message names the flag and what to fix.
#[derive(Debug)]
pub enum JsonArgError {
    Stdin { flag: String, source: io::Error },
    File { flag: String, path: String, source: io::Error },
    NotJson { flag: String, origin: Origin, source: serde_json::Error },
}

impl fmt::Display for JsonArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonArgError::Stdin { flag, source } => write!(f, "{flag} -: cannot read stdin: {source}"),
            JsonArgError::File { flag, path, source } => {
                write!(f, "{flag} {path}: cannot read the file: {source} (inline JSON must start with '{{' or '[')")
            }
            JsonArgError::NotJson { flag, origin, source } => {
                let origin = match origin {
                    Origin::Inline => "the inline value".to_owned(),
                    Origin::Stdin => "stdin".to_owned(),
                    Origin::File(path) => format!("file {path}"),
                };
                write!(f, "{flag}: {origin} is not valid JSON: {source}")
            }
        }
    }
}

impl std::error::Error for JsonArgError {}

/// Reads and parses the argument of `flag`.
pub fn load(flag: &str, value: &str) -> Result<Value, JsonArgError> {
    let flag = || flag.to_owned();
    let (text, origin) = if value.trim_start().starts_with(['{', '[']) {
        (value.to_owned(), Origin::Inline)
    } else if value == "-" {
        let mut text = String::new();
        io::stdin().read_to_string(&mut text).map_err(|source| JsonArgError::Stdin { flag: flag(), source })?;
        (text, Origin::Stdin)
    } else {
        let text = std::fs::read_to_string(value).map_err(|source| JsonArgError::File {
            flag: flag(),
            path: value.to_owned(),
            source,
        })?;
        (text, Origin::File(value.to_owned()))
    };
    serde_json::from_str(&text).map_err(|source| JsonArgError::NotJson { flag: flag(), origin, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_file_and_errors() {
        assert_eq!(load("--x", r#" {"a": 1}"#).unwrap(), serde_json::json!({"a": 1}));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(load("--x", file.to_str().unwrap()).unwrap(), serde_json::json!([1, 2]));
        let err = load("--x", "{oops").unwrap_err();
        assert!(matches!(&err, JsonArgError::NotJson { origin: Origin::Inline, .. }), "{err:?}");
        assert!(err.to_string().starts_with("--x: the inline value is not valid JSON"), "{err}");
        std::fs::write(&file, "{oops").unwrap();
        let err = load("--x", file.to_str().unwrap()).unwrap_err();
        assert!(matches!(&err, JsonArgError::NotJson { origin: Origin::File(_), .. }), "{err:?}");
        let err = load("--x", "/no/such/file").unwrap_err();
        assert!(matches!(&err, JsonArgError::File { source, .. } if source.kind() == io::ErrorKind::NotFound));
        assert!(err.to_string().contains("cannot read the file"), "{err}");
    }
}
