//! Everything ssh-exec reads from its environment, parsed once, with a message for every mistake. The names are
//! the existing shell implementation's, so its configurations keep working.

use std::path::PathBuf;

use crate::config_error::ConfigError;
use crate::env::{self, Entry, Resolution};
use crate::env_sent::{self, Allowlist};
use crate::ssh::config_error::SshConfigError;
use crate::ssh::key::checked_key;
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
    ("SSH_ENV_PASSTHROUGH", "names of variables sent to the command, and PREFIX* patterns, separated by commas or spaces (besides the default allowlist, nothing else is)"),
    ("SSH_ENV_DEFAULTS", "0: do not send the default allowlist (TERM COLORTERM LANG LANGUAGE LC_* TZ NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE CI)"),
    ("SSH_CONNECT_TIMEOUT", "seconds to connect (default 10)"),
    ("SSH_CONTROL_PERSIST", "seconds the shared connection stays open after its last command (default 60; 0: one connection per command)"),
    ("SSH_MAX_SESSIONS", "commands at once on the shared connection (default 8; the host's sshd allows 10 by default)"),
    ("SSH_STOP_GRACE", "seconds between SIGTERM and SIGKILL when a command on the host is stopped (default 2; tenths allowed)"),
    ("SSH_TTY", "1: give the command a terminal (ssh -tt), 0: never; default: when stdin and stdout are terminals"),
    ("SSH_STDIN", "0: do not forward stdin (the command reads end of file); default: forwarded, streamed by ssh"),
    ("SSH_COMMANDS", "for --install-wrappers: more commands (comma or space separated) that go to the host, each wrapped when the host has it"),
];

/// ssh-exec's allowlist: sidecar-exec's policy (names, `PREFIX*` patterns, the default allowlist), with names a
/// shell can assign, as the host's shell assigns each.
const ALLOWLIST: Allowlist = Allowlist {
    list: "SSH_ENV_PASSTHROUGH",
    defaults_switch: "SSH_ENV_DEFAULTS",
    entry: Entry::ShellVariableOrPattern,
};

pub const DEFAULT_KEY: &str = "/home/agent/.ssh/id_rsa";

/// `SSH_STOP_GRACE`'s default, in tenths of a second: shorter than exec-server's 5 s `--grace`, because ssh-exec is
/// stopped by someone waiting at a prompt (Ctrl-C, a tool's timeout) and the time passes only for a command that
/// outlives its SIGTERM.
pub const DEFAULT_STOP_GRACE_TENTHS: u32 = 20;
/// `SSH_STOP_GRACE`'s largest value, in seconds (10 minutes).
const MAX_STOP_GRACE_SECS: u64 = 600;

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
    /// The variables sent ([`env_sent`]), by name.
    pub env: Vec<(String, String)>,
    pub connect_timeout: u32,
    /// Seconds; 0: no shared connection.
    pub control_persist: u32,
    pub max_sessions: u32,
    /// Between SIGTERM and SIGKILL when the command is stopped, in tenths of a second (the stop script counts them).
    pub stop_grace_tenths: u32,
    /// SSH_TTY: `Some(true)` forces a terminal, `Some(false)` forbids one, `None` decides by our own terminals.
    pub tty: Option<bool>,
    /// Whether stdin is forwarded (everything but SSH_STDIN=0).
    pub forward_stdin: bool,
}

impl SshSettings {
    pub fn from_env() -> Result<Self, ConfigError<SshConfigError>> {
        let host = env::text("SSH_HOST").ok_or(SshConfigError::NoHost)?;
        word("SSH_HOST", &host)?;
        let user = env::text("SSH_USER").unwrap_or_else(|| "agent".into());
        word("SSH_USER", &user)?;
        let key = match env::text("SSH_KEY_PATH") {
            Some(path) => Some(checked_key(PathBuf::from(path))?),
            None => checked_key(PathBuf::from(DEFAULT_KEY)).ok(),
        };
        let known_hosts = env::text("SSH_KNOWN_HOSTS").map(PathBuf::from);
        if let Some(file) = known_hosts.as_ref().filter(|file| !file.is_file()) {
            return Err(SshConfigError::KnownHostsNotAFile(file.clone()).into());
        }
        let host_key_alias = env::text("SSH_HOST_KEY_ALIAS");
        if let Some(alias) = &host_key_alias {
            word("SSH_HOST_KEY_ALIAS", alias)?;
        }
        let workspace = env::text("SSH_WORKSPACE").unwrap_or_else(|| "/workspace".into());
        let mapping = match env::text("SSH_HOST_CWD") {
            Some(host_cwd) => Some(Mapping::new(&workspace, &host_cwd).map_err(SshConfigError::Paths)?),
            None => None,
        };
        let whole_seconds = |name, default: u32, min, max| {
            env::seconds(name, Resolution::WholeSeconds, min, Some(max))
                .map(|secs| secs.map_or(default, |secs| secs.as_secs() as u32))
        };
        let grace = env::seconds("SSH_STOP_GRACE", Resolution::Tenths, 0, Some(MAX_STOP_GRACE_SECS))?;
        Ok(SshSettings {
            port: env::count("SSH_PORT", 22, 1, 65535)? as u16,
            host,
            user,
            key,
            known_hosts,
            host_key_alias,
            mapping,
            host_path: env::text("SSH_HOST_PATH"),
            login_shell: env::switched_on("SSH_LOGIN_SHELL"),
            env: env_sent::from_env(ALLOWLIST)?.values.into_iter().collect(),
            connect_timeout: whole_seconds("SSH_CONNECT_TIMEOUT", 10, 1, 3600)?,
            control_persist: whole_seconds("SSH_CONTROL_PERSIST", 60, 0, 604_800)?,
            max_sessions: env::count("SSH_MAX_SESSIONS", 8, 1, 1000)?,
            stop_grace_tenths: grace.map_or(DEFAULT_STOP_GRACE_TENTHS, |grace| (grace.as_millis() / 100) as u32),
            tty: match (env::switched_on("SSH_TTY"), env::switched_off("SSH_TTY")) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            forward_stdin: !env::switched_off("SSH_STDIN"),
        })
    }

    /// `host:port` for messages.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A value ssh takes as one option word: no spaces or control characters, and no leading `-` (it would be read as
/// an option).
fn word(name: &'static str, value: &str) -> Result<(), SshConfigError> {
    if value.starts_with('-') || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(SshConfigError::NotOneWord { name, value: value.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_word_is_one_word_and_no_option() {
        assert!(word("SSH_HOST", "build-mac").is_ok() && word("SSH_USER", "me.x").is_ok());
        for bad in ["-oProxyCommand=x", "a b", "a\nb"] {
            let err = word("SSH_HOST", bad).unwrap_err();
            assert!(matches!(err, SshConfigError::NotOneWord { name: "SSH_HOST", .. }), "{bad:?}");
        }
    }
}
