//! Transport failures: what ssh's own error text means, and what to fix. Reported as exit 255 with one
//! `ssh-exec:` line that says it was the connection, not the command.

use crate::ssh::settings::SshSettings;
use crate::terminal_safe::terminal_safe;

/// A kind of transport failure, recognised from ssh's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshFailure {
    UnknownHost,
    Refused,
    TimedOut,
    Unreachable,
    HostKey,
    Auth,
    Closed,
}

impl SshFailure {
    /// The failure ssh's text describes, if it is one of the known ones.
    pub fn of(said: &str) -> Option<SshFailure> {
        let said = said.to_ascii_lowercase();
        let has = |needle: &str| said.contains(needle);
        Some(if has("host key verification failed") || has("remote host identification has changed") {
            SshFailure::HostKey
        } else if has("could not resolve hostname") || has("name or service not known") {
            SshFailure::UnknownHost
        } else if has("connection refused") {
            SshFailure::Refused
        } else if has("timed out") {
            SshFailure::TimedOut
        } else if has("no route to host") || has("network is unreachable") {
            SshFailure::Unreachable
        } else if has("permission denied") || has("too many authentication failures") {
            SshFailure::Auth
        } else if has("connection closed") || has("connection reset") || has("kex_exchange_identification") {
            SshFailure::Closed
        } else {
            return None;
        })
    }
}

/// The line for a call whose command never started: ssh exited with `status` (255 for its own failures) and said
/// `said` on stderr.
pub fn not_started(settings: &SshSettings, key: Option<&str>, said: &str, status: Option<i32>) -> String {
    let address = settings.address();
    let who = format!("{}@{}", settings.user, address);
    let known_hosts = settings
        .known_hosts
        .as_ref()
        .map_or_else(|| "~/.ssh/known_hosts".to_owned(), |file| format!("SSH_KNOWN_HOSTS ({})", file.display()));
    let what = match (status, SshFailure::of(said)) {
        (Some(255) | None, Some(SshFailure::UnknownHost)) => {
            format!("cannot resolve the host name {:?}: check SSH_HOST", settings.host)
        }
        (Some(255) | None, Some(SshFailure::Refused)) => {
            format!("{address} refused the connection: is sshd running there, and on SSH_PORT {}?", settings.port)
        }
        (Some(255) | None, Some(SshFailure::TimedOut)) => format!(
            "no answer from {address} within SSH_CONNECT_TIMEOUT ({} s): check SSH_HOST, SSH_PORT and the network",
            settings.connect_timeout
        ),
        (Some(255) | None, Some(SshFailure::Unreachable)) => format!("{address} cannot be reached from here"),
        (Some(255) | None, Some(SshFailure::HostKey)) => format!(
            "the host key of {address} does not match the one in {known_hosts}: if the host was reinstalled, replace \
             its entry (ssh-keygen -R); otherwise something is in between"
        ),
        (Some(255) | None, Some(SshFailure::Auth)) => format!(
            "{who} refused the login with {}: add its public key to ~{}/.ssh/authorized_keys on the host, or fix \
             SSH_USER / SSH_KEY_PATH",
            key.map_or_else(|| "the agent's or ssh's default keys".to_owned(), |key| format!("the key {key}")),
            settings.user
        ),
        (Some(255) | None, Some(SshFailure::Closed)) => format!(
            "{address} closed the connection before the command started (sshd's MaxStartups or MaxSessions, or not \
             an sshd on that port)"
        ),
        (Some(255) | None, None) => format!("ssh could not run the command on {address}"),
        (Some(code), _) => format!(
            "the shell of {who} did not run ssh-exec's command wrapper (it exited {code}): the user's login shell on \
             the host must be a POSIX shell (sh, bash, zsh, ksh)"
        ),
    };
    // ssh's last line is its verdict ("Host key verification failed."); the banner before it is not worth a line.
    let said = said.lines().rev().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
    if said.is_empty() {
        format!("connection failed, the command did not run: {what}")
    } else {
        format!("connection failed, the command did not run: {what}; ssh said: {}", terminal_safe(said))
    }
}

/// The line for a call whose command started but whose end never came back.
pub fn lost(settings: &SshSettings, status: Option<i32>) -> String {
    format!(
        "connection to {} lost while the command ran (ssh exited {}, no status from the host): the command's outcome \
         is unknown and it may still be running there",
        settings.address(),
        status.map_or_else(|| "on a signal".to_owned(), |code| code.to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_recognised() {
        assert_eq!(
            SshFailure::of("ssh: connect to host 127.0.0.1 port 1: Connection refused"),
            Some(SshFailure::Refused)
        );
        assert_eq!(SshFailure::of("root@127.0.0.1: Permission denied (publickey)."), Some(SshFailure::Auth));
        assert_eq!(SshFailure::of("Host key verification failed."), Some(SshFailure::HostKey));
        assert_eq!(
            SshFailure::of("ssh: Could not resolve hostname nope: Name or service not known"),
            Some(SshFailure::UnknownHost)
        );
        assert_eq!(
            SshFailure::of("ssh: connect to host 10.0.0.1 port 22: Connection timed out"),
            Some(SshFailure::TimedOut)
        );
        assert_eq!(SshFailure::of("something else"), None);
    }
}
