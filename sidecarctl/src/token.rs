//! The per-run bearer token: random, in a file the run creates (mode 0600, owned by the caller), bound read-only
//! into every container (at the plan's token path); builders read it as `EXEC_SERVER_TOKEN_FILE`, the agent as
//! `SIDECAR_TOKEN_FILE`. So `/exec` is never open on a shared host, and the token never appears in a container's
//! configuration (`inspect`).
//!
//! A 0600 file is readable in a container only by its owner's uid. A container that runs as another numeric uid
//! (an agent image built for uid 1000 started by root) gets its own copy owned by that uid, which only root may
//! create; otherwise the run stops with advice instead of starting an agent that cannot authenticate.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use protocol::random_hex;

use crate::names::RunName;

#[derive(Debug, thiserror::Error)]
pub enum RunTokenError {
    #[error("token file {}: {error}", .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// The state folder's parent is not ours alone (someone else made it, or it is group/world accessible).
    #[error("{} is not a folder only this user can access: refusing to keep a token there", .path.display())]
    Unsafe { path: PathBuf },
    /// A container runs as `user`, which cannot read the caller's file and cannot be given a copy.
    #[error(
        "{container} runs as user '{user}', which cannot read the run's token file (uid {caller}, mode 0600): build \
         its image for uid {caller}, set its user (--agent-user UID:GID, or run_as_caller_uid), or pass --no-token"
    )]
    Unreadable { container: String, user: String, caller: u32 },
}

/// The run's token files; removed by `remove` (teardown) or by `down` through the folder's label.
#[derive(Debug, Clone)]
pub struct RunToken {
    pub dir: PathBuf,
    secret: String,
    caller: u32,
}

/// The folder that holds the token folders of the caller's runs: `$XDG_RUNTIME_DIR/sidecarctl`, or
/// `/tmp/sidecarctl-<uid>`, created 0700 and checked to be ours alone (a folder in /tmp could be planted).
pub fn state_root() -> Result<PathBuf, RunTokenError> {
    let uid = nix::unistd::getuid().as_raw();
    let root = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("sidecarctl"),
        None => std::env::temp_dir().join(format!("sidecarctl-{uid}")),
    };
    match DirBuilder::new().mode(0o700).create(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(RunTokenError::Io { path: root, error }),
    }
    let meta = std::fs::symlink_metadata(&root).map_err(|error| RunTokenError::Io { path: root.clone(), error })?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(RunTokenError::Unsafe { path: root });
    }
    Ok(root)
}

impl RunToken {
    /// Creates `<state_root>/<run>/token` with a fresh 256-bit secret.
    pub fn create(run: &RunName) -> Result<RunToken, RunTokenError> {
        let dir = state_root()?.join(run.as_str());
        // A stale folder of a crashed run of the same name: its token is not reused.
        let _ = std::fs::remove_dir_all(&dir);
        DirBuilder::new().mode(0o700).create(&dir).map_err(|error| RunTokenError::Io { path: dir.clone(), error })?;
        let token = RunToken {
            dir,
            secret: random_hex(32).expect("/dev/urandom is readable"),
            caller: nix::unistd::getuid().as_raw(),
        };
        token.write(&token.dir.join("token"))?;
        Ok(token)
    }

    fn write(&self, path: &Path) -> Result<(), RunTokenError> {
        let io = |error| RunTokenError::Io { path: path.to_path_buf(), error };
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io)?;
        file.write_all(self.secret.as_bytes()).map_err(io)
    }

    /// The host file to bind for a container that runs as `user` (the engine's `User`: "", "uid", "uid:gid" or a
    /// name). Same uid as the caller (or root in the container, which the caller's file serves as well when the
    /// caller is root): the shared file. Another numeric uid: a copy chowned to it, when we are root.
    pub fn file_for(&self, container: &str, user: &str) -> Result<PathBuf, RunTokenError> {
        let shared = self.dir.join("token");
        let (uid_text, gid_text) = user.split_once(':').unwrap_or((user, ""));
        let uid = if uid_text.is_empty() { Some(0) } else { uid_text.parse::<u32>().ok() };
        let unreadable = || RunTokenError::Unreadable {
            container: container.to_owned(),
            user: if user.is_empty() { "root".to_owned() } else { user.to_owned() },
            caller: self.caller,
        };
        match uid {
            Some(uid) if uid == self.caller => Ok(shared),
            Some(uid) if self.caller == 0 => {
                let gid = gid_text.parse::<u32>().unwrap_or(uid);
                let copy = self.dir.join(format!("token-{uid}"));
                if !copy.exists() {
                    self.write(&copy)?;
                    std::os::unix::fs::chown(&copy, Some(uid), Some(gid))
                        .map_err(|error| RunTokenError::Io { path: copy.clone(), error })?;
                }
                Ok(copy)
            }
            _ => Err(unreadable()),
        }
    }

    pub fn secret(&self) -> &str {
        &self.secret
    }

    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_secret_in_a_private_file() {
        let run = RunName::named(&format!("unit-{}", random_hex(4).unwrap())).unwrap();
        let token = RunToken::create(&run).unwrap();
        let file = token.dir.join("token");
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.uid(), nix::unistd::getuid().as_raw());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), token.secret());
        assert_eq!(token.secret().len(), 64);
        let me = nix::unistd::getuid().as_raw().to_string();
        assert_eq!(token.file_for("x", &format!("{me}:{me}")).unwrap(), file);
        // A name cannot be mapped to a uid on the host: refused with advice.
        let refused = token.file_for("sidecarctl-x-agent", "agent").unwrap_err().to_string();
        assert!(refused.contains("--no-token"), "{refused}");
        token.remove();
        assert!(!token.dir.exists());
    }
}
