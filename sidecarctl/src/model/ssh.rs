//! The profile's `ssh:` block: the SSH backend's settings for the agent. ssh-exec (in the agent image beside
//! sidecar-exec) reads its configuration from `SSH_*` variables; each key of the block is one of them, named as the
//! variable without its prefix, in lower case (`host` → `SSH_HOST`, `key_path` → `SSH_KEY_PATH`).
//!
//! Decisions:
//! - **Files are host paths.** `key_path` and `known_hosts` name files on the machine that runs `sidecarctl` (the
//!   profile is the operator's, and the key is not in the agent image): each is bound read-only into the agent at a
//!   fixed path under `/run/secrets/`, and the variable names that path. A key already inside the agent image is
//!   named with `-e SSH_KEY_PATH=…`, which overrides the block.
//! - **Only the shape is checked here** (known keys, a host, a port in 1–65535, whole numbers, true/false, existing
//!   files): the ranges and rules of the other values are ssh-exec's, which reports them itself with its own
//!   messages; copying them here would let the two drift.
//! - **`workspace` defaults to the agent's workspace** (ssh-exec's own default is `/workspace`), so a profile that
//!   binds the workspace elsewhere maps paths right without saying it twice.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_norway::Value;

use super::{Volume, VolumeSource};
use crate::profile::scalar_string;

/// How a key's value becomes its variable's.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A string (or a number) as written.
    Text,
    /// A whole number, at least `min` and at most `max`.
    Number { min: u64, max: u64 },
    /// `true`/`false`, written `1`/`0`.
    Flag,
    /// A list of strings joined with `separator`, or one string as written.
    List { separator: &'static str },
    /// A file on this machine, bound read-only into the agent at `target`.
    HostFile { target: &'static str },
}

/// Every key of the block, with its variable: the names are ssh-exec's (docs/ssh-exec.md, "Variables").
const KEYS: &[(&str, &str, Kind)] = &[
    ("host", "SSH_HOST", Kind::Text),
    ("port", "SSH_PORT", Kind::Number { min: 1, max: 65535 }),
    ("user", "SSH_USER", Kind::Text),
    ("key_path", "SSH_KEY_PATH", Kind::HostFile { target: "/run/secrets/ssh-key" }),
    ("known_hosts", "SSH_KNOWN_HOSTS", Kind::HostFile { target: "/run/secrets/ssh-known-hosts" }),
    ("host_key_alias", "SSH_HOST_KEY_ALIAS", Kind::Text),
    ("workspace", "SSH_WORKSPACE", Kind::Text),
    ("host_cwd", "SSH_HOST_CWD", Kind::Text),
    ("host_path", "SSH_HOST_PATH", Kind::List { separator: ":" }),
    ("login_shell", "SSH_LOGIN_SHELL", Kind::Flag),
    ("env_passthrough", "SSH_ENV_PASSTHROUGH", Kind::List { separator: "," }),
    ("connect_timeout", "SSH_CONNECT_TIMEOUT", Kind::Number { min: 0, max: u64::MAX }),
    ("control_persist", "SSH_CONTROL_PERSIST", Kind::Number { min: 0, max: u64::MAX }),
    ("max_sessions", "SSH_MAX_SESSIONS", Kind::Number { min: 0, max: u64::MAX }),
    ("tty", "SSH_TTY", Kind::Flag),
    ("stdin", "SSH_STDIN", Kind::Flag),
    ("commands", "SSH_COMMANDS", Kind::List { separator: "," }),
];

/// The SSH backend of a run: the agent's `SSH_*` variables and the host files it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSsh {
    /// Variable → value, for the agent's environment.
    pub env: BTreeMap<String, String>,
    /// Variable → the file `key_path` or `known_hosts` names, bound read-only (source: the canonical host path;
    /// target: the variable's value).
    pub files: BTreeMap<String, Volume>,
}

/// The keys of the block, for the messages that list them.
fn key_list() -> String {
    KEYS.iter().map(|(key, ..)| *key).collect::<Vec<_>>().join(", ")
}

/// Why the `ssh:` block is invalid. The message names the key as written (`ssh.port`).
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("ssh must be a mapping of the SSH backend's settings ({})", key_list())]
    NotAMapping,
    #[error("ssh.{key} is not a setting of the SSH backend (one of: {})", key_list())]
    UnknownKey { key: String },
    #[error("ssh.host is required: the host that runs the commands")]
    NoHost,
    #[error("ssh.{key} must be {expected}")]
    BadValue { key: String, expected: String },
    #[error("ssh.{key} {path}: {problem}")]
    File { key: String, path: String, problem: FileProblem },
    /// A file the agent's user could not read (checked by `up` once it knows that user).
    #[error(
        "ssh.{key} {} (uid {owner}, mode {mode:o}) cannot be read by the agent's user '{user}': run the agent as uid \
         {owner} (--agent-user {owner}:GID, or an agent image built with AGENT_UID={owner})",
        .path.display()
    )]
    Unreadable { key: String, path: PathBuf, user: String, owner: u32, mode: u32 },
}

impl AgentSsh {
    /// The block as written (`None`: no block, or `ssh: null`). `cwd` resolves relative file paths, `workspace`
    /// stands for `${CWD}`, and `agent_workspace` is `SSH_WORKSPACE` when the block does not say.
    pub fn from_profile(
        block: Option<&Value>,
        cwd: &Path,
        workspace: &Path,
        agent_workspace: Option<&str>,
    ) -> Result<Option<AgentSsh>, SshError> {
        let block = match block {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Mapping(block)) => block,
            Some(_) => return Err(SshError::NotAMapping),
        };
        let mut backend = AgentSsh { env: BTreeMap::new(), files: BTreeMap::new() };
        for (key, value) in block {
            let key = scalar_string(key).unwrap_or_default();
            let (_, variable, kind) =
                KEYS.iter().find(|(name, ..)| *name == key).ok_or(SshError::UnknownKey { key: key.clone() })?;
            if value.is_null() {
                continue;
            }
            let bad = |expected: &str| SshError::BadValue { key: key.clone(), expected: expected.to_owned() };
            let text = match kind {
                Kind::Text => scalar_string(value).filter(|_| !value.is_bool()).ok_or_else(|| bad("a string"))?,
                Kind::Number { min, max } => {
                    let range = if *max == u64::MAX {
                        "a whole number".to_owned()
                    } else {
                        format!("a whole number from {min} to {max}")
                    };
                    value.as_u64().filter(|n| (*min..=*max).contains(n)).ok_or_else(|| bad(&range))?.to_string()
                }
                Kind::Flag => match value.as_bool() {
                    Some(on) => (if on { "1" } else { "0" }).to_owned(),
                    None => return Err(bad("true or false")),
                },
                Kind::List { separator } => match value {
                    Value::Sequence(items) => items
                        .iter()
                        .map(|item| item.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("a list of strings, or one string"))?
                        .join(separator),
                    Value::String(text) => text.clone(),
                    _ => return Err(bad("a list of strings, or one string")),
                },
                Kind::HostFile { target } => {
                    let written = value.as_str().ok_or_else(|| bad("a file path on this machine"))?;
                    let source = host_file(&key, written, cwd, workspace)?;
                    let volume =
                        Volume { source: VolumeSource::Host(source), target: (*target).to_owned(), read_only: true };
                    backend.files.insert((*variable).to_owned(), volume);
                    (*target).to_owned()
                }
            };
            backend.env.insert((*variable).to_owned(), text);
        }
        if backend.env.get("SSH_HOST").is_none_or(|host| host.trim().is_empty()) {
            return Err(SshError::NoHost);
        }
        if let Some(target) = agent_workspace {
            backend.env.entry("SSH_WORKSPACE".to_owned()).or_insert_with(|| target.to_owned());
        }
        Ok(Some(backend))
    }

    /// The backend without the variables named in `overridden` (given with `-e`, which wins) and without the
    /// files of those variables.
    pub fn without(&self, overridden: &[&str]) -> AgentSsh {
        let kept = |name: &String| !overridden.contains(&name.as_str());
        AgentSsh {
            env: self.env.iter().filter(|(name, _)| kept(name)).map(|(k, v)| (k.clone(), v.clone())).collect(),
            files: self.files.iter().filter(|(name, _)| kept(name)).map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }

    /// `NAME=VALUE` for the agent's environment.
    pub fn env_list(&self) -> Vec<String> {
        self.env.iter().map(|(name, value)| format!("{name}={value}")).collect()
    }

    /// The files as read-only volumes of the agent.
    pub fn mounts(&self) -> Vec<Volume> {
        self.files.values().cloned().collect()
    }

    /// The first file the agent's `user` (the engine's `User`: "", "uid", "uid:gid" or a name) could not read: a
    /// file that only its owner may read, owned by another uid. The agent runs with every capability dropped, so
    /// not even its root reads past the mode. Group-readable files and named users pass (their groups are the
    /// image's, unknown here).
    pub fn unreadable_by(&self, user: &str) -> Option<SshError> {
        let uid_text = user.split_once(':').map_or(user, |(uid, _)| uid);
        let uid: u32 = if uid_text.is_empty() { 0 } else { uid_text.parse().ok()? };
        self.files.iter().find_map(|(variable, file)| {
            let VolumeSource::Host(path) = &file.source else { return None };
            let meta = std::fs::metadata(path).ok()?;
            let mode = meta.mode() & 0o7777;
            let readable = mode & 0o044 != 0 || (meta.uid() == uid && mode & 0o400 != 0);
            (!readable).then(|| SshError::Unreadable {
                key: KEYS
                    .iter()
                    .find(|(_, name, _)| name == variable)
                    .map_or_else(String::new, |(key, ..)| (*key).to_owned()),
                path: path.clone(),
                user: if user.is_empty() { "root".to_owned() } else { user.to_owned() },
                owner: meta.uid(),
                mode,
            })
        })
    }
}

/// `~/…` is under `$HOME`, `${CWD}` is the workspace, a relative path is relative to the current folder; the file
/// must exist and be a regular file (a missing bind source would be created by the engine as an empty folder).
fn host_file(key: &str, written: &str, cwd: &Path, workspace: &Path) -> Result<PathBuf, SshError> {
    let file_error = |problem| SshError::File { key: key.to_owned(), path: written.to_owned(), problem };
    let expanded = written.replace("${CWD}", &workspace.display().to_string());
    let path = match expanded.strip_prefix("~/") {
        Some(rest) => Path::new(&std::env::var("HOME").map_err(|_| file_error(FileProblem::NoHome))?).join(rest),
        None => cwd.join(&expanded),
    };
    let canonical = path.canonicalize().map_err(|e| file_error(FileProblem::Io(e)))?;
    if !canonical.is_file() {
        return Err(file_error(FileProblem::NotAFile));
    }
    Ok(canonical)
}

/// Why a file the block names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileProblem {
    #[error(transparent)]
    Io(std::io::Error),
    /// `~/…` with no `HOME` to expand it.
    #[error("HOME is not set")]
    NoHome,
    #[error("not a file")]
    NotAFile,
}
