//! Everything ssh-exec reads from its environment, parsed once, with a message for every mistake. The names are
//! the existing shell implementation's, so its configurations keep working.

use std::path::PathBuf;

use crate::config_error::ConfigError;
use crate::ssh::paths::Mapping;

/// The variables ssh-exec reads, for `--help`.
pub const VARIABLES: &[(&str, &str)] = &[
    ("SSH_HOST", "required: the host that runs the commands (a name from ~/.ssh/config works)"),
    ("SSH_PORT", "its sshd port (default 22)"),
    ("SSH_USER", "the user there (default agent)"),
    ("SSH_KEY_PATH", "private key (default /home/agent/.ssh/id_rsa when it exists; a key with the wrong owner or mode is used through a private 0600 copy)"),
    ("SSH_KNOWN_HOSTS", "known_hosts file: strict host-key checking against it (default: ~/.ssh/known_hosts, new hosts accepted, changed keys refused)"),
    ("SSH_HOST_KEY_ALIAS", "the name the host key is recorded under (ssh's HostKeyAlias)"),
    ("SSH_WORKSPACE", "this container's workspace (default /workspace)"),
    ("SSH_HOST_CWD", "the host folder that is the workspace: the cwd and /workspace/… arguments are mapped; a cwd outside the workspace is refused"),
    ("SSH_HOST_PATH", "folders put before PATH on the host (e.g. /opt/homebrew/bin)"),
    ("SSH_LOGIN_SHELL", "1: run the command in a login shell (`$SHELL -l`), which reads the host's profile"),
    ("SSH_ENV_PASSTHROUGH", "comma or space separated names of variables sent to the command (nothing else is)"),
    ("SSH_CONNECT_TIMEOUT", "seconds to connect (default 10)"),
    ("SSH_CONTROL_PERSIST", "seconds the shared connection stays open after its last command (default 60; 0: one connection per command)"),
    ("SSH_MAX_SESSIONS", "commands at once on the shared connection (default 8; the host's sshd allows 10 by default)"),
    ("SSH_STOP_GRACE", "seconds between SIGTERM and SIGKILL when a command on the host is stopped (default 2; tenths allowed)"),
    ("SSH_TTY", "1: give the command a terminal (ssh -tt); stdin is then forwarded"),
    ("SSH_STDIN", "1: forward stdin even when it is a pipe or terminal (a regular file is always forwarded)"),
    ("SSH_COMMANDS", "for --install-wrappers: more commands (comma or space separated) that go to the host"),
];

pub const DEFAULT_KEY: &str = "/home/agent/.ssh/id_rsa";

/// `SSH_STOP_GRACE`'s default, in tenths of a second: shorter than exec-server's 5 s `--grace`, because ssh-exec is
/// stopped by someone waiting at a prompt (Ctrl-C, a tool's timeout) and the time passes only for a command that
/// outlives its SIGTERM.
pub const DEFAULT_STOP_GRACE_TENTHS: u32 = 20;
/// `SSH_STOP_GRACE`'s largest value, in tenths of a second (10 minutes).
const MAX_STOP_GRACE_TENTHS: u32 = 6000;

/// How ssh-exec reaches the host and runs commands there.
#[derive(Debug, Clone)]
pub struct SshSettings {
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The key as configured (checked: it exists and is not empty); see [`crate::ssh::key`] for the file ssh gets.
    pub key: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub host_key_alias: Option<String>,
    pub mapping: Option<Mapping>,
    pub host_path: Option<String>,
    pub login_shell: bool,
    /// Passed-through variables, in the order named.
    pub env: Vec<(String, String)>,
    pub connect_timeout: u32,
    /// Seconds; 0: no shared connection.
    pub control_persist: u32,
    pub max_sessions: u32,
    /// Between SIGTERM and SIGKILL when the command is stopped, in tenths of a second (the stop script counts them).
    pub stop_grace_tenths: u32,
    pub tty: bool,
    pub forward_stdin_pipe: bool,
}

impl SshSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        let host = text("SSH_HOST").ok_or_else(|| {
            ConfigError("SSH_HOST is not set: name the host that runs the commands (e.g. SSH_HOST=build-mac)".into())
        })?;
        word("SSH_HOST", &host)?;
        let user = text("SSH_USER").unwrap_or_else(|| "agent".into());
        word("SSH_USER", &user)?;
        let key = match text("SSH_KEY_PATH") {
            Some(path) => Some(checked_key(PathBuf::from(path), true)?),
            None => checked_key(PathBuf::from(DEFAULT_KEY), false).ok(),
        };
        let known_hosts = text("SSH_KNOWN_HOSTS").map(PathBuf::from);
        if let Some(file) = &known_hosts {
            if !file.is_file() {
                return Err(ConfigError(format!(
                    "SSH_KNOWN_HOSTS is {} but that is not a readable file: point it at a known_hosts file holding the \
                     host's key (ssh-keyscan -p PORT HOST), or unset it",
                    file.display()
                )));
            }
        }
        let host_key_alias = text("SSH_HOST_KEY_ALIAS");
        if let Some(alias) = &host_key_alias {
            word("SSH_HOST_KEY_ALIAS", alias)?;
        }
        let workspace = text("SSH_WORKSPACE").unwrap_or_else(|| "/workspace".into());
        let mapping = match text("SSH_HOST_CWD") {
            Some(host_cwd) => Some(Mapping::new(&workspace, &host_cwd)?),
            None => None,
        };
        Ok(SshSettings {
            port: number("SSH_PORT", 22, 1, 65535)? as u16,
            host,
            user,
            key,
            known_hosts,
            host_key_alias,
            mapping,
            host_path: text("SSH_HOST_PATH"),
            login_shell: flag("SSH_LOGIN_SHELL"),
            env: passthrough()?,
            connect_timeout: number("SSH_CONNECT_TIMEOUT", 10, 1, 3600)?,
            control_persist: number("SSH_CONTROL_PERSIST", 60, 0, 604_800)?,
            max_sessions: number("SSH_MAX_SESSIONS", 8, 1, 1000)?,
            stop_grace_tenths: tenths("SSH_STOP_GRACE", DEFAULT_STOP_GRACE_TENTHS, MAX_STOP_GRACE_TENTHS)?,
            tty: flag("SSH_TTY"),
            forward_stdin_pipe: flag("SSH_STDIN"),
        })
    }

    /// `host:port` for messages.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A variable's value, trimmed; unset and blank are the same.
fn text(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn flag(name: &str) -> bool {
    matches!(text(name).as_deref(), Some("1" | "true" | "yes" | "on"))
}

fn number(name: &str, default: u32, min: u32, max: u32) -> Result<u32, ConfigError> {
    let Some(value) = text(name) else { return Ok(default) };
    value
        .parse::<u32>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ConfigError(format!("{name} must be a whole number from {min} to {max}, got {value:?}")))
}

/// Seconds with at most one decimal (`2`, `0.5`), as tenths of a second from 0 to `max`.
fn tenths(name: &str, default: u32, max: u32) -> Result<u32, ConfigError> {
    text(name).map_or(Ok(default), |value| parse_tenths(name, &value, max))
}

fn parse_tenths(name: &str, value: &str, max: u32) -> Result<u32, ConfigError> {
    let (whole, tenth) = value.split_once('.').unwrap_or((value, "0"));
    let digits = |part: &str, most: usize| (1..=most).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit());
    let tenths = (digits(whole, 6) && digits(tenth, 1))
        .then(|| whole.parse::<u32>().ok().zip(tenth.parse::<u32>().ok()))
        .flatten()
        .map(|(seconds, tenths)| seconds * 10 + tenths)
        .filter(|n| *n <= max);
    tenths.ok_or_else(|| {
        ConfigError(format!(
            "{name} must be seconds from 0 to {} with at most one decimal (e.g. 0.5), got {value:?}",
            max / 10
        ))
    })
}

/// A value ssh takes as one option word: no spaces or control characters, and no leading `-` (it would be read as
/// an option).
fn word(name: &str, value: &str) -> Result<(), ConfigError> {
    if value.starts_with('-') || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError(format!(
            "{name} is {value:?}: it must be one word without spaces and must not start with '-'"
        )));
    }
    Ok(())
}

/// The key file, checked: a configured key must exist; any key must not be empty (ssh would fail with a puzzling
/// "invalid format" instead).
fn checked_key(path: PathBuf, configured: bool) -> Result<PathBuf, ConfigError> {
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => Err(ConfigError(format!(
            "the private key {} is empty: mount the key itself there, or point SSH_KEY_PATH at it",
            path.display()
        ))),
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(ConfigError(format!("SSH_KEY_PATH {} is not a file", path.display()))),
        Err(err) if configured => {
            Err(ConfigError(format!("cannot read the private key SSH_KEY_PATH={}: {err}", path.display())))
        }
        Err(err) => Err(ConfigError(err.to_string())),
    }
}

/// SSH_ENV_PASSTHROUGH: names separated by commas or spaces; each must be a shell variable name (the value is
/// assigned in the host's shell). Variables that are not set here are not sent.
fn passthrough() -> Result<Vec<(String, String)>, ConfigError> {
    let list = std::env::var("SSH_ENV_PASSTHROUGH").unwrap_or_default();
    let mut env: Vec<(String, String)> = Vec::new();
    for name in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|n| !n.is_empty()) {
        if !is_variable_name(name) {
            return Err(ConfigError(format!(
                "SSH_ENV_PASSTHROUGH names {name:?}, which is not a variable name (letters, digits and _, not \
                 starting with a digit)"
            )));
        }
        if env.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        match std::env::var(name) {
            Ok(value) => env.push((name.to_owned(), value)),
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(ConfigError(format!(
                    "{name} (listed in SSH_ENV_PASSTHROUGH) is not valid UTF-8 and cannot be forwarded"
                )))
            }
        }
    }
    Ok(env)
}

pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_grace_is_seconds_in_tenths() {
        let parse = |value: &str| parse_tenths("SSH_STOP_GRACE", value, 6000).ok();
        let cases = [("5", Some(50)), ("0.5", Some(5)), ("0", Some(0)), ("600", Some(6000))];
        for (value, expected) in cases {
            assert_eq!(parse(value), expected, "{value:?}");
        }
        for bad in ["601", "0.25", "-1", "1e3", "abc", ".5", "5.", "1.5.5", "9999999999"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn variable_names() {
        assert!(is_variable_name("GOFLAGS") && is_variable_name("_x1"));
        assert!(
            !is_variable_name("1X") && !is_variable_name("A-B") && !is_variable_name("") && !is_variable_name("A;B")
        );
    }
}
