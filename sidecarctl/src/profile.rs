//! The profile file as written: the seed's YAML shape (`volumes:`, `tool_backends: sidecars: [...]`, `ssh:`),
//! before any validation. Values whose range the seed validates with its own message (port, ready_timeout) are
//! read loosely here so that `model` can word the error, instead of a YAML type error.
//!
//! YAML is read with `serde_norway`: the maintained fork of `serde_yaml` (archived in 2024), same API and the
//! same libyaml-derived parser, with regular releases; `serde_yml`, the other fork, is deprecated.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_norway::Value;

/// A whole profile. Keys this tool does not use (an agent CLI's profile has many) are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct Profile {
    /// `docker` or `compose` work; `custom` cannot carry sidecars (the seed's message).
    pub runner: Option<String>,
    /// The agent's binds; one of them must be the workspace the builders share. Absent: the workspace alone.
    pub volumes: Option<Vec<VolumeSpec>>,
    #[serde(default)]
    pub tool_backends: ToolBackends,
    /// The SSH backend's block (`host:`, `port:`, `key_path:`, …): its variables for the agent, read by
    /// `model::AgentSsh`, which names a mistake by its key.
    pub ssh: Option<Value>,
    /// Resource limits for every container of the run, `NAME=SOFT[:HARD]` (see `--ulimit`).
    #[serde(default)]
    pub ulimits: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// A host path (`${CWD}` is the workspace) or a named volume.
    pub source: String,
    pub target: String,
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolBackends {
    pub sidecars: Option<Vec<SidecarSpec>>,
    /// The default `ready_timeout` of every sidecar, in seconds.
    pub ready_timeout: Option<Value>,
}

/// One `tool_backends.sidecars[i]` entry as written. Unknown keys are rejected: a typo (`cache_volume`) would
/// otherwise silently do nothing.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SidecarSpec {
    #[serde(default)]
    pub runtime: String,
    #[serde(default)]
    pub image: String,
    pub port: Option<i64>,
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, Value>,
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    #[serde(default)]
    pub cache_volumes: Vec<String>,
    pub healthcheck: Option<HealthcheckSpec>,
    pub workspace_target: Option<String>,
    pub ready_timeout: Option<Value>,
    pub run_as_caller_uid: Option<bool>,
}

/// A compose-style healthcheck override: only `test` is used (`["CMD", argv…]`, `["CMD-SHELL", "script"]`, or a
/// bare argv); the timing keys are accepted and ignored, the gate has its own (every 2 s up to `ready_timeout`).
#[derive(Debug, Clone, Deserialize)]
pub struct HealthcheckSpec {
    pub test: Vec<String>,
    #[serde(flatten)]
    pub _timing: BTreeMap<String, Value>,
}

/// The most a profile may hold: a profile is a few KiB, and the YAML reader keeps all of it in memory (many times
/// its size as values).
pub const MAX_BYTES: u64 = 1024 * 1024;

/// The most `[` and `{` a profile may hold. The YAML reader's time grows with the product of a file's size and its
/// flow collections' nesting (a 200 KB file of nested `[` took 40 s, under a key sidecarctl ignores); the count of
/// `[` and `{` anywhere (in strings and comments too) bounds that nesting, whatever the file's quoting, where a
/// depth found by a second reader of ours could be fooled. A profile written by a person has a few dozen.
pub const MAX_FLOW_OPENERS: usize = 1000;

/// Why a profile could not be read: the file, its size, or its YAML.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("profile {path} is larger than {} KiB: is it the right file?", MAX_BYTES / 1024)]
    TooLarge { path: String },
    #[error(
        "profile {path} has {openers} '[' and '{{' (at most {max}): write long lists and mappings in block style \
         (`- item` lines, `key: value` lines)",
        max = MAX_FLOW_OPENERS
    )]
    FlowNesting { path: String, openers: usize },
    #[error("profile {path}: {error}")]
    Yaml { path: String, error: serde_norway::Error },
}

impl Profile {
    pub fn parse(text: &str, path: &str) -> Result<Profile, ProfileError> {
        // An empty file is an empty profile, not a YAML error.
        if text.trim().is_empty() {
            return Ok(Profile::default());
        }
        let openers = text.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
        if openers > MAX_FLOW_OPENERS {
            return Err(ProfileError::FlowNesting { path: path.to_owned(), openers });
        }
        serde_norway::from_str(text).map_err(|error| ProfileError::Yaml { path: path.to_owned(), error })
    }

    /// Reads at most [`MAX_BYTES`] (+1, to tell a larger file): `-p /dev/zero` or a huge file ends with an error, not
    /// with the memory of the machine. Not only regular files: `-p <(generate-profile)` is a pipe.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let shown = path.display().to_string();
        let read_error = |error| ProfileError::Read { path: shown.clone(), error };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
        if bytes.len() as u64 > MAX_BYTES {
            return Err(ProfileError::TooLarge { path: shown });
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error())))?;
        Profile::parse(&text, &shown)
    }
}

/// A YAML scalar as an environment value: `false` and `8080` are written unquoted as often as quoted.
pub fn scalar_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

/// A YAML number as seconds; anything else (a string, a list) is `None`, which validation reports.
pub fn seconds(value: &Value) -> Option<f64> {
    value.as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deep flow nesting (here under a key sidecarctl ignores) is refused before the YAML reader
    /// sees it, and an endless file ends at the cap.
    #[test]
    fn deep_nesting_and_endless_files_are_refused_with_a_reason() {
        let deep = format!("ignored: {}", "[".repeat(100_000));
        let error = Profile::parse(&deep, "deep.yaml").unwrap_err().to_string();
        assert_eq!(
            error,
            "profile deep.yaml has 100000 '[' and '{' (at most 1000): write long lists and mappings in block style \
             (`- item` lines, `key: value` lines)"
        );
        // Quoting cannot hide nesting from the count.
        let hidden = format!("ignored: {}", "[ \"]\", ".repeat(2000));
        assert!(matches!(Profile::parse(&hidden, "q").unwrap_err(), ProfileError::FlowNesting { openers: 2000, .. }));
        let endless = Profile::load(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(endless, "profile /dev/zero is larger than 1024 KiB: is it the right file?");
        // What a person writes stays well inside.
        Profile::parse("tool_backends: {sidecars: [{runtime: node, image: x, env: {A: '[x]'}}]}", "ok").unwrap();
    }
}
