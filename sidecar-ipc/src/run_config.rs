//! SYMPOZIUM_RUN_CONFIG_JSON, the run's parameters: always a JSON object for the orchestrator, and
//! `sidecar-ipc config KEY` to read one value from a shell.

use std::ffi::OsStr;
use std::fmt;
use std::io::Write;

use serde_json::{Map, Value};

pub const VAR: &str = "SYMPOZIUM_RUN_CONFIG_JSON";

/// What is wrong with SYMPOZIUM_RUN_CONFIG_JSON, or with the key asked for.
#[derive(Debug)]
pub enum RunConfigError {
    NotUtf8,
    NotJson(serde_json::Error),
    /// Valid JSON, but not an object (nor null): an excerpt of what it holds.
    NotObject {
        excerpt: String,
    },
    /// `config KEY` for a key the object does not have, and no `--default`.
    NoKey {
        key: String,
        keys: Vec<String>,
    },
}

impl fmt::Display for RunConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunConfigError::NotUtf8 => write!(f, "{VAR} is not valid UTF-8, so it cannot hold JSON"),
            RunConfigError::NotJson(err) => {
                write!(f, "{VAR} is not valid JSON ({err}); it must hold a JSON object such as {EXAMPLE}")
            }
            RunConfigError::NotObject { excerpt } => {
                write!(f, "{VAR} holds {excerpt}, not a JSON object; it must hold an object such as {EXAMPLE}")
            }
            RunConfigError::NoKey { key, keys } => write!(
                f,
                "{VAR} has no key {key:?} (its keys: [{}]); pass --default VALUE to make it optional",
                keys.join(", ")
            ),
        }
    }
}

impl std::error::Error for RunConfigError {}

/// The value the orchestrator must see. Absent, empty or `null` becomes `{}` (the controller's own rule for empty
/// parameters); an object is passed on exactly as written; anything else is an error naming what was found.
pub fn normalize(raw: Option<&OsStr>) -> Result<String, RunConfigError> {
    let Some(raw) = raw else { return Ok("{}".to_owned()) };
    let text = raw.to_str().ok_or(RunConfigError::NotUtf8)?;
    match parse(text)? {
        None => Ok("{}".to_owned()),
        Some(_) => Ok(text.to_owned()),
    }
}

/// The parameters as an object; `None` for absent, empty or `null`.
fn parse(text: &str) -> Result<Option<Map<String, Value>>, RunConfigError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(text).map_err(RunConfigError::NotJson)? {
        Value::Null => Ok(None),
        Value::Object(object) => Ok(Some(object)),
        other => Err(RunConfigError::NotObject { excerpt: agent_files::excerpt(other.to_string().as_bytes()) }),
    }
}

const EXAMPLE: &str = r#"{"inputDir":"/data"}"#;

/// `sidecar-ipc config [KEY] [--default VALUE]`: prints the whole object, or one value (a string as it is, anything
/// else as compact JSON).
pub fn print_config(key: Option<&str>, default: Option<&str>) -> Result<(), RunConfigError> {
    let config = match std::env::var_os(VAR) {
        Some(raw) => parse(raw.to_str().ok_or(RunConfigError::NotUtf8)?)?.unwrap_or_default(),
        None => Map::new(),
    };
    let text = match key {
        None => Value::Object(config).to_string(),
        Some(key) => match (config.get(key), default) {
            (Some(Value::String(text)), _) => text.clone(),
            (Some(value), _) => value.to_string(),
            (None, Some(default)) => default.to_owned(),
            (None, None) => {
                let mut keys: Vec<String> = config.keys().cloned().collect();
                keys.sort_unstable();
                return Err(RunConfigError::NoKey { key: key.to_owned(), keys });
            }
        },
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}").and_then(|()| stdout.flush());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_empty_and_null_become_an_empty_object() {
        assert_eq!(normalize(None).unwrap(), "{}");
        assert_eq!(normalize(Some(OsStr::new(""))).unwrap(), "{}");
        assert_eq!(normalize(Some(OsStr::new(" null "))).unwrap(), "{}");
        assert_eq!(normalize(Some(OsStr::new(r#"{"a": "b"}"#))).unwrap(), r#"{"a": "b"}"#);
    }

    #[test]
    fn anything_else_is_a_clear_error() {
        let err = normalize(Some(OsStr::new("[1]"))).unwrap_err();
        assert!(matches!(&err, RunConfigError::NotObject { excerpt } if excerpt == "\"[1]\""), "{err:?}");
        assert!(err.to_string().contains("holds \"[1]\", not a JSON object"), "{err}");
        let err = normalize(Some(OsStr::new("{oops"))).unwrap_err();
        assert!(matches!(err, RunConfigError::NotJson(_)), "{err:?}");
        assert!(err.to_string().contains("is not valid JSON"), "{err}");
    }
}
