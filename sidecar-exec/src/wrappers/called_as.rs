//! A wrapper is a symlink to its client, named after its command: how a client called through one turns the name it
//! was called by (argv[0]) into the command line the `#!/bin/sh` wrapper used to pass, with no shell started.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::wrappers::backends::Client;
use crate::wrappers::SSH_TOOLS;

/// The program's arguments (without the program name) for `argv` (with it): as they are for a direct call, and for
/// a call through a wrapper link what its `#!/bin/sh` wrapper passed before the caller's arguments:
///
/// - sidecar-exec called as a command of the runtime table (`npm`): `node npm …`; called by any other name (a link
///   for convenience, `sx`), as a direct call;
/// - ssh-exec called as `host-run`: `-- …`; as `auto-run`: `--auto-run …`; as any other name (`gofmt`, an
///   SSH_COMMANDS entry such as `xcodebuild`): `-- gofmt …`. Every name ssh-exec is linked as is a command, since
///   SSH_COMMANDS can name anything.
///
/// A call is direct when the name it was called by is the client's own or its binary's file name, so a renamed
/// binary (`sidecar-exec-static`) still works as itself.
pub fn arguments(client: Client, argv: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut argv = argv.into_iter();
    let called = argv.next();
    let prefix =
        called.as_deref().and_then(|called| wrapper_name(client, called)).and_then(|name| prefix(client, name));
    prefix.into_iter().flatten().chain(argv).collect()
}

/// The file name `called` names when it is not the client's own (a wrapper link), else `None`.
fn wrapper_name(client: Client, called: &OsStr) -> Option<&OsStr> {
    let name = Path::new(called).file_name()?;
    if name == client.name() {
        return None;
    }
    // Only now the one readlink of /proc/self/exe, for a binary installed under another name.
    let own = std::env::current_exe().ok()?;
    (own.file_name() != Some(name)).then_some(name)
}

/// What a wrapper named `name` passes before the caller's arguments; `None` when the name is no wrapper's.
fn prefix(client: Client, name: &OsStr) -> Option<Vec<OsString>> {
    match client {
        Client::SidecarExec => {
            let name = name.to_str()?;
            let (runtime, _) = protocol::RUNTIMES.iter().find(|(_, commands)| commands.contains(&name))?;
            Some(vec![OsString::from(*runtime), OsString::from(name)])
        }
        Client::SshExec => Some(match name.to_str() {
            Some(tool) if tool == SSH_TOOLS[0] => vec!["--".into()],
            Some(tool) if tool == SSH_TOOLS[1] => vec!["--auto-run".into()],
            _ => vec!["--".into(), name.to_owned()],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(client: Client, argv: &[&str]) -> Vec<String> {
        arguments(client, argv.iter().map(OsString::from)).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn a_link_name_becomes_the_wrappers_command_line() {
        assert_eq!(args(Client::SidecarExec, &["/opt/sidecar/wrappers/npm", "-v"]), ["node", "npm", "-v"]);
        assert_eq!(args(Client::SidecarExec, &["python3", "-c", "x"]), ["python", "python3", "-c", "x"]);
        assert_eq!(args(Client::SidecarExec, &["/opt/sidecar/sidecar-exec", "node", "npm"]), ["node", "npm"]);
        assert_eq!(args(Client::SidecarExec, &["sx", "--status"]), ["--status"]);
        assert_eq!(args(Client::SshExec, &["gofmt", "-l", "."]), ["--", "gofmt", "-l", "."]);
        assert_eq!(args(Client::SshExec, &["/w/host-run", "uname"]), ["--", "uname"]);
        assert_eq!(args(Client::SshExec, &["auto-run", "./app"]), ["--auto-run", "./app"]);
        assert_eq!(args(Client::SshExec, &["ssh-exec", "--check"]), ["--check"]);
        assert!(args(Client::SshExec, &[]).is_empty());
    }
}
