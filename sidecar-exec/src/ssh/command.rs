//! The `ssh` command lines: one set of options for every connection ssh-exec makes, so the shared master, a plain
//! connection and a stop session all reach the host the same way.

use std::path::{Path, PathBuf};

use crate::ssh::settings::SshSettings;

/// How a call reaches the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Through the shared master connection listening on this control socket.
    Shared(PathBuf),
    /// A connection of its own (no control socket can exist, or multiplexing is off).
    Direct,
}

/// `ssh` with the options every connection uses, up to (not including) `--` and the destination:
///
/// - `BatchMode=yes`: never a prompt (a passphrase or an unknown host would hang an agent); keys come from the
///   agent or an unencrypted key file.
/// - `LogLevel=ERROR`: no "Warning: Permanently added …" in the command's stderr.
/// - `ServerAliveInterval=15`, `ServerAliveCountMax=4`: a dead connection is noticed within a minute.
/// - `-e none`: with a terminal, `~.` is data, not ssh's escape.
/// - SSH_KNOWN_HOSTS given: that file only, `StrictHostKeyChecking=yes`. Not given: the user's known_hosts with
///   `accept-new` (a new host is recorded, a changed key is refused: never `no`).
/// - `ControlMaster=no` and the route's `ControlPath` (`none` for a direct connection, so a `ControlMaster` in
///   ~/.ssh/config cannot interfere).
pub fn ssh(settings: &SshSettings, key: Option<&Path>, route: &Route) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("ssh");
    command.args(common(settings, key));
    command.args(["-o", "ControlMaster=no", "-o"]);
    command.arg(match route {
        Route::Shared(socket) => file_option("ControlPath", socket),
        Route::Direct => "ControlPath=none".to_owned(),
    });
    command
}

/// The shared master for `socket`: authenticates, listens on the socket, goes to the background (`-f`) and stays
/// until `control_persist` seconds after its last session.
pub fn master(settings: &SshSettings, key: Option<&Path>, socket: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("ssh");
    command.args(common(settings, key));
    command.args(["-o", "ControlMaster=yes", "-o"]);
    command.arg(file_option("ControlPath", socket));
    command.args(["-o", &format!("ControlPersist={}", settings.control_persist), "-N", "-f", "--", &settings.host]);
    command
}

fn common(settings: &SshSettings, key: Option<&Path>) -> Vec<String> {
    let mut args = vec![
        "-p".to_owned(),
        settings.port.to_string(),
        "-l".to_owned(),
        settings.user.clone(),
        "-e".to_owned(),
        "none".to_owned(),
    ];
    let mut option = |text: String| {
        args.push("-o".to_owned());
        args.push(text);
    };
    option("BatchMode=yes".into());
    option("LogLevel=ERROR".into());
    option(format!("ConnectTimeout={}", settings.connect_timeout));
    option("ServerAliveInterval=15".into());
    option("ServerAliveCountMax=4".into());
    match &settings.known_hosts {
        Some(file) => {
            option(file_option("UserKnownHostsFile", file));
            option("StrictHostKeyChecking=yes".into());
        }
        None => option("StrictHostKeyChecking=accept-new".into()),
    }
    if let Some(alias) = &settings.host_key_alias {
        option(format!("HostKeyAlias={alias}"));
    }
    // Not `-i`: ssh checks `-i`'s path as given (so an escaped `%%` is "not accessible" and the key is dropped),
    // then expands `%` tokens in it; IdentityFile is read as the other file options are.
    if let Some(key) = key {
        option(file_option("IdentityFile", key));
    }
    args
}

/// `-o NAME="PATH"` for a file option, so ssh reads `path` literally: ssh splits an option's value into words at
/// spaces (UserKnownHostsFile takes several files: `/a b/known_hosts` was two, and neither held the key: a false
/// "host key does not match" alarm) unless it is double-quoted, inside which `\` and `\"` are its escapes; and it
/// expands `%` tokens (`%d` is the home folder) in file options, where `%%` is a literal `%`.
fn file_option(name: &str, path: &Path) -> String {
    let path = path.to_string_lossy().replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%");
    format!("{name}=\"{path}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_option_is_quoted_and_escaped() {
        let option = file_option("UserKnownHostsFile", Path::new(r#"/a b/%d "q" \x 'y'"#));
        assert_eq!(option, r#"UserKnownHostsFile="/a b/%%d \"q\" \\x 'y'""#);
    }
}
