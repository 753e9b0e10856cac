//! The bearer token, read in one place: from `EXEC_SERVER_TOKEN` or a token file, trimmed the same way, and kept
//! out of what commands can read.
//!
//! What a command can see of the token: not its environment (the server passes on no `EXEC_SERVER_*` variable), and
//! not the server's `/proc/<pid>/environ` (the variable is removed from the server's environment and overwritten in
//! the block that file shows, before any thread starts). But that block is not the only copy: the process that
//! started the server keeps the variable in its own environment. In the builder images that is tini, PID 1, with
//! the same uid, so `cat /proc/1/environ` shows the token to any command (so does a shell that exported it and
//! still runs). Hiding the variable here only keeps this process from adding a copy; a token file avoids them all,
//! which is why sidecarctl, the compose file and the Kubernetes manifest use one. What a command can also see: the
//! token file, if its permissions let the command's user read it (mount it readable by the server only, or run
//! commands as another user); and the server's memory, where the kernel lets the same user read it (`ptrace_scope`
//! 0, or `CAP_SYS_PTRACE`). The token guards the API against the network, not against the commands the server runs.

use std::path::{Path, PathBuf};

pub use protocol::token::normalize;
use protocol::token::TokenFileError;

/// The variable that holds the token itself (it has no flag, so it never shows in `ps`).
pub const VARIABLE: &str = protocol::vars::EXEC_SERVER_TOKEN;

/// Takes the token out of the environment: reads `EXEC_SERVER_TOKEN` (normalized; empty counts as unset), removes
/// it from this process's environment and overwrites it in the environment block that `/proc/<pid>/environ` shows
/// (which `remove_var` alone does not touch). Call first thing in `main`, before any thread starts: changing the
/// environment is not thread-safe, and a thread could copy the block first.
///
/// The token is returned even when hiding it failed (no writable `/proc/self/mem`); the error says why, for a warning.
pub fn take_from_env() -> (Option<String>, Result<(), std::io::Error>) {
    let Some(value) = std::env::var_os(VARIABLE) else { return (None, Ok(())) };
    let token = normalize(&value.to_string_lossy()).map(str::to_owned);
    std::env::remove_var(VARIABLE);
    (token, hide_from_proc(VARIABLE))
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
            TokenFileError::Unreadable(err) => write!(f, "cannot read token file {path}: {err}"),
            TokenFileError::Empty => write!(f, "token file {path} is empty: put the token in it, or drop --token-file"),
        }
    }
}

impl std::error::Error for TokenError {}

/// Reads a token file ([`protocol::token::read_file`]). An empty file is an error rather than a silently open
/// server.
pub fn read_file(path: &Path) -> Result<String, TokenError> {
    protocol::token::read_file(path).map_err(|problem| TokenError { path: path.to_path_buf(), problem })
}

/// Overwrites every `NAME=…` entry of the environment block the kernel shows in `/proc/self/environ` with NUL bytes,
/// through `/proc/self/mem` (our own memory, so no privilege is involved). The block is the one `execve` laid out;
/// after `remove_var` nothing in the process points into the entry any more.
fn hide_from_proc(name: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the parenthesised name start with field 3; env_start and env_end are fields 50 and 51.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let field = |n: usize| -> std::io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| std::io::Error::other("/proc/self/stat has no environment bounds"))
    };
    let (start, end) = (field(50)?, field(51)?);
    let length = usize::try_from(end.saturating_sub(start)).map_err(std::io::Error::other)?;
    let mem = std::fs::OpenOptions::new().read(true).write(true).open("/proc/self/mem")?;
    let mut block = vec![0; length];
    mem.read_exact_at(&mut block, start)?;
    let prefix = format!("{name}=");
    let mut offset = 0u64;
    for entry in block.split(|&b| b == 0) {
        if entry.starts_with(prefix.as_bytes()) {
            mem.write_all_at(&vec![0; entry.len()], start + offset)?;
        }
        offset += entry.len() as u64 + 1;
    }
    let shown = std::fs::read("/proc/self/environ")?;
    if shown.split(|&b| b == 0).any(|entry| entry.starts_with(prefix.as_bytes())) {
        return Err(std::io::Error::other("the entry is still shown after overwriting it"));
    }
    Ok(())
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
