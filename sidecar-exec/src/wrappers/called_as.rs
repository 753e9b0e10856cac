//! A wrapper is a symlink to its client, named after its command: how a client called through one turns the name it
//! was called by (`argv[0]`) into the command line the `#!/bin/sh` wrapper used to pass, with no shell started.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::wrappers::backends::Client;
use crate::wrappers::SSH_TOOLS;

/// The program's arguments (without the program name) for `argv` (with it): as they are for a direct call, and for
/// a call through a wrapper link what its `#!/bin/sh` wrapper passed before the caller's arguments:
///
/// - sidecar-exec called as a command of the runtime table (`npm`): `node npm …`; called by any other name (its own,
///   a renamed binary, a link for convenience such as `sx`), as a direct call;
/// - ssh-exec called as `host-run`: `-- …`; as `auto-run`: `--auto-run …`; as its own name or its binary's file name
///   (a renamed `ssh-exec-static`), as a direct call; as any other name (`gofmt`, an SSH_COMMANDS entry such as
///   `xcodebuild`): `-- gofmt …`, since SSH_COMMANDS can name anything.
pub fn arguments(client: Client, argv: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut argv = argv.into_iter();
    let called = argv.next();
    let name = called.as_deref().map(Path::new).and_then(Path::file_name);
    let prefix = name.and_then(|name| prefix(client, name));
    prefix.into_iter().flatten().chain(argv).collect()
}

/// sidecar-exec called through a wrapper link of the runtime table (`npm …` → runtime `node`, command `npm …`): the
/// runtime and the command line, forwarded as they are. Every argument after the link's name is the command's, so
/// there is nothing to parse: the wrapped call skips clap, which was about a twentieth of its client's CPU
/// (BENCHMARKS.md, "P1: where a forwarded call's time goes"). `None` for any other name: a direct call, whose
/// arguments are argv's own (what [`arguments`] gives it), parsed.
pub fn wrapped_command(argv: &[OsString]) -> Option<(OsString, Vec<OsString>)> {
    let name = argv.first().map(Path::new).and_then(Path::file_name)?;
    let mut prefix = prefix(Client::SidecarExec, name)?.into_iter();
    let runtime = prefix.next()?;
    Some((runtime, prefix.chain(argv[1..].iter().cloned()).collect()))
}

/// What a wrapper named `name` passes before the caller's arguments; `None` when the name is no wrapper's.
fn prefix(client: Client, name: &OsStr) -> Option<Vec<OsString>> {
    if name == client.name() {
        return None;
    }
    match client {
        // A table lookup, no system call: this is every wrapped call's start.
        Client::SidecarExec => {
            let name = name.to_str()?;
            let (runtime, _) = protocol::RUNTIMES.iter().find(|(_, commands)| commands.contains(&name))?;
            Some(vec![OsString::from(*runtime), OsString::from(name)])
        }
        Client::SshExec => Some(match name.to_str() {
            Some(tool) if tool == SSH_TOOLS[0] => vec!["--".into()],
            Some(tool) if tool == SSH_TOOLS[1] => vec!["--auto-run".into()],
            // Only here the one readlink of /proc/self/exe, for a binary installed under another name.
            _ if std::env::current_exe().ok().as_deref().and_then(Path::file_name) == Some(name) => return None,
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

    #[test]
    fn a_wrapped_call_is_the_direct_call_its_link_stands_for() {
        let argv = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        for call in [&["/opt/sidecar/wrappers/npm", "--explain", "-v"][..], &["python3"], &["cargo", "--", "--help"]] {
            let (runtime, command) = wrapped_command(&argv(call)).unwrap();
            let mut direct = vec![runtime];
            direct.extend(command);
            assert_eq!(direct, arguments(Client::SidecarExec, argv(call)), "{call:?}");
        }
        assert_eq!(wrapped_command(&argv(&["/opt/sidecar/sidecar-exec", "node", "npm"])), None);
        assert_eq!(wrapped_command(&argv(&["sx", "--status"])), None);
        assert_eq!(wrapped_command(&[]), None);
    }
}
