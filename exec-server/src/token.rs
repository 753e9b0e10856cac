//! The bearer token, read in one place: from `EXEC_SERVER_TOKEN` or a token file, trimmed the same way, and kept
//! out of what commands can read.
//!
//! What a command can see of the token: not its environment (the server passes on no `EXEC_SERVER_*` variable), and
//! not the server's `/proc/<pid>/environ`: a server given `EXEC_SERVER_TOKEN` re-executes itself at once (same pid,
//! same arguments) without the variable, handing the token over in a memory file on its stdin, which the new image
//! reads and replaces with `/dev/null`. The kernel shows a process the environment its `execve` was given, so the
//! block that file shows never holds the token, and nothing writes to this process's memory to hide it. But that
//! block is not the only copy: the process that started the server keeps the variable in its own environment. In
//! the builder images that is tini, PID 1, with the same uid, so `cat /proc/1/environ` shows the token to any
//! command (so does a shell that exported it and still runs). Hiding the variable here only keeps this process from
//! adding a copy; a token file avoids them all, which is why sidecarctl, the compose file and the Kubernetes manifest
//! use one. What a command can also see: the token file, if its permissions let the command's user read it (mount it
//! readable by the server only, or run commands as another user); and the server's memory, where the kernel lets the
//! same user read it (`ptrace_scope` 0, or `CAP_SYS_PTRACE`). The token guards the API against the network, not
//! against the commands the server runs.

use std::path::{Path, PathBuf};

pub use protocol::token::normalize;
use protocol::token::TokenFileError;

/// The variable that holds the token itself (it has no flag, so it never shows in `ps`).
pub const VARIABLE: &str = protocol::vars::EXEC_SERVER_TOKEN;

/// Set by a server that re-executes itself to hand its token over, to its own pid (which the exec keeps): a value
/// anyone else set names another process and is ignored, so stdin is never taken for a token by mistake.
const HANDOFF: &str = "EXEC_SERVER_TOKEN_HANDOFF";

/// The token from the environment, and whether it is still shown there.
#[derive(Debug)]
pub struct FromEnv {
    /// `EXEC_SERVER_TOKEN`, normalized (empty counts as unset).
    pub token: Option<String>,
    /// Why `/proc/<pid>/environ` still shows the token (the re-exec could not be made), for a warning.
    pub still_shown: Option<std::io::Error>,
}

/// Takes the token out of the environment. Call first thing in `main`: given `EXEC_SERVER_TOKEN`, this re-executes
/// the server without it (it does not return then) and the new image takes the token from its stdin. Returns the
/// token even when the re-exec could not be made (`still_shown` says why). An error: this image was handed a token
/// and cannot read it, so it must not serve (it would serve without a token).
pub fn take_from_env() -> std::io::Result<FromEnv> {
    if std::env::var_os(HANDOFF).is_some_and(|pid| pid.to_str() == Some(&std::process::id().to_string())) {
        return Ok(FromEnv { token: Some(receive()?), still_shown: None });
    }
    let Some(value) = std::env::var_os(VARIABLE) else { return Ok(FromEnv { token: None, still_shown: None }) };
    let Some(token) = normalize(&value.to_string_lossy()).map(str::to_owned) else {
        return Ok(FromEnv { token: None, still_shown: None });
    };
    let still_shown = Some(hand_over(&token));
    Ok(FromEnv { token: Some(token), still_shown })
}

/// Re-executes this program (`/proc/self/exe`: the running binary, even if its file was replaced) with the same
/// arguments and environment but `EXEC_SERVER_TOKEN`, the token on stdin in a memory file. Returns only if that
/// failed, with why.
fn hand_over(token: &str) -> std::io::Error {
    use std::io::{Seek, Write};
    use std::os::unix::process::CommandExt;
    let memory = match nix::sys::memfd::memfd_create("exec-server-token", nix::sys::memfd::MFdFlags::MFD_CLOEXEC) {
        Ok(fd) => std::fs::File::from(fd),
        Err(err) => return err.into(),
    };
    let prepared =
        (&memory).write_all(token.as_bytes()).and_then(|()| (&memory).rewind()).and_then(|()| memory.try_clone());
    let stdin = match prepared {
        Ok(stdin) => stdin,
        Err(err) => return err,
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "exec-server".into());
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env_remove(VARIABLE)
        .env(HANDOFF, std::process::id().to_string())
        .stdin(stdin)
        .exec();
    // The exec may have put the memory file on our stdin before it failed: empty it, and stdin goes back to nothing.
    let _ = nix::unistd::ftruncate(&memory, 0);
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(null);
    }
    err
}

/// In the re-executed image: the token from stdin, which is then emptied and replaced with `/dev/null`.
fn receive() -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::io::stdin().lock().read_to_string(&mut text)?;
    // Reading took it all; emptying the file and letting it go only leave nothing behind for /proc/<pid>/fd/0.
    let _ = nix::unistd::ftruncate(std::io::stdin(), 0);
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(null);
    }
    normalize(&text).map(str::to_owned).ok_or_else(|| std::io::Error::other("the token handed over on stdin is empty"))
}

/// Why `--token-file` gives no token: the file, and what is wrong with it.
#[derive(Debug)]
pub struct TokenError {
    pub path: PathBuf,
    pub problem: TokenFileError,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match &self.problem {
            TokenFileError::Empty => write!(f, "token file {path} is empty: put the token in it, or drop --token-file"),
            problem => write!(f, "token file {path} {problem}"),
        }
    }
}

impl std::error::Error for TokenError {}

/// Reads a token file ([`protocol::token::read_file`]). An empty file is an error rather than a silently open
/// server.
pub fn read_file(path: &Path) -> Result<String, TokenError> {
    protocol::token::read_file(path).map_err(|problem| TokenError { path: path.to_path_buf(), problem })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_is_trimmed_and_an_empty_one_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "tok\n").unwrap();
        assert_eq!(read_file(file.path()).unwrap(), "tok");
        std::fs::write(file.path(), "\n").unwrap();
        let empty = read_file(file.path()).unwrap_err();
        assert!(matches!(empty.problem, TokenFileError::Empty));
        assert!(empty.to_string().contains("is empty"));
    }
}
