//! The shared connection: one OpenSSH master per host (ControlMaster), started under a lock so parallel calls do
//! not race to create it, and a counting lock so at most SSH_MAX_SESSIONS commands use it at once (the host's sshd
//! refuses sessions beyond its MaxSessions, 10 by default). Both locks are flock(2) on files next to the control
//! socket, so they work across processes and are released by the kernel when a holder dies.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tokio::time::{sleep, timeout, Instant};

use crate::ssh::command;
use crate::ssh::settings::SshSettings;

/// How often a waiter retries a busy lock. flock has no timeout and a blocking call would hold up signal handling;
/// waiters only poll while every slot is busy or a master is being started.
const RETRY: Duration = Duration::from_millis(10);

/// ssh binds the master's socket under a temporary name 17 characters longer, and a Unix socket path has at most
/// 104 bytes on macOS (108 on Linux): a longer path cannot be a control socket, so such calls connect directly.
const MAX_SOCKET_PATH: usize = 104 - 1 - 17;

/// Why there is no private folder.
#[derive(Debug, thiserror::Error)]
pub enum NoFolder {
    /// It cannot be created (read-only file system, …): calls connect directly, quietly.
    #[error("the private folder cannot be created")]
    Unavailable,
    /// `dir` exists but others could use it (not a folder of `uid` with mode 700): calls connect directly, with this
    /// warning, since someone may be trying to hijack the connection.
    #[error(
        "{} is not a folder of uid {uid} with mode 700, so it is not used for the shared connection (someone else \
         could take it over): remove it; connecting directly meanwhile",
        .dir.display()
    )]
    Unsafe { dir: PathBuf, uid: u32 },
}

/// ssh-exec's private folder for control sockets, locks and key copies: `$XDG_RUNTIME_DIR/ssh-exec`, else
/// `$TMPDIR/ssh-exec-<uid>`, mode 0700 and ours (checked, since /tmp is shared).
pub fn private_dir() -> Result<PathBuf, NoFolder> {
    let uid = nix::unistd::getuid().as_raw();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => PathBuf::from(runtime).join("ssh-exec"),
        None => std::env::temp_dir().join(format!("ssh-exec-{uid}")),
    };
    if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_err() && !dir.exists() {
        return Err(NoFolder::Unavailable);
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|_| NoFolder::Unavailable)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(NoFolder::Unsafe { dir, uid });
    }
    Ok(dir)
}

/// The control socket of the master for these settings (one per user, host, port, key and host-key settings), or
/// `None` when its path would be too long.
pub fn socket_for(dir: &Path, settings: &SshSettings, key: Option<&Path>) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&settings.user, &settings.host, settings.port, key, &settings.known_hosts, &settings.host_key_alias)
        .hash(&mut hasher);
    let socket = dir.join(format!("{:016x}.sock", hasher.finish()));
    (socket.as_os_str().len() <= MAX_SOCKET_PATH).then_some(socket)
}

/// Whether a master is listening on `socket` (a connect, which the master answers with its hello and forgets).
pub fn alive(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// Why the master could not be started.
#[derive(Debug)]
pub enum MasterError {
    /// ssh could not reach or log in to the host: what it said. Reported as the call's transport failure (trying
    /// again without the master would fail the same way, and a timeout would cost twice).
    Transport(String),
    /// Anything else (the socket could not be made, a lock never came free): the call connects directly.
    Unavailable,
}

/// Makes sure a master listens on `socket`: if none does, one caller at a time (under `<socket>.lock`) starts it
/// and the others then find it.
pub async fn ensure_master(settings: &SshSettings, key: Option<&Path>, socket: &Path) -> Result<(), MasterError> {
    if alive(socket) {
        return Ok(());
    }
    let patience = Duration::from_secs(u64::from(settings.connect_timeout) * 2 + 10);
    let _lock = lock(&with_extension(socket, "lock"), patience).await.ok_or(MasterError::Unavailable)?;
    if alive(socket) {
        return Ok(());
    }
    let _ = std::fs::remove_file(socket);
    let log_path = with_extension(socket, "log");
    let log = File::create(&log_path).map_err(|_| MasterError::Unavailable)?;
    let mut master = command::master(settings, key, socket);
    // The master lives on in the background: it must hold none of our pipes, or a reader of our output would wait
    // for it; and it must not keep a directory of ours busy.
    master.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(log).current_dir("/");
    let mut child = master.spawn().map_err(|_| MasterError::Unavailable)?;
    let status = match timeout(patience, child.wait()).await {
        Ok(Ok(status)) => status,
        _ => {
            let _ = child.start_kill();
            return Err(MasterError::Unavailable);
        }
    };
    if status.success() && alive(socket) {
        return Ok(());
    }
    let said = std::fs::read_to_string(&log_path).unwrap_or_default();
    if crate::ssh::transport::SshFailure::of(&said).is_some() {
        Err(MasterError::Transport(said))
    } else {
        Err(MasterError::Unavailable)
    }
}

/// One of the SSH_MAX_SESSIONS session slots, held until dropped.
#[derive(Debug)]
pub struct SessionSlot(#[allow(dead_code)] Flock<File>);

/// Waits for a free session slot of `socket`'s master: `<socket>.slot<i>`, i < `max`, each an exclusive flock.
/// `None` when the slot files cannot be made (the call then runs unlimited).
pub async fn session_slot(socket: &Path, max: u32) -> Option<SessionSlot> {
    let first = std::process::id() % max;
    loop {
        for i in (0..max).map(|i| (first + i) % max) {
            let file =
                File::options().create(true).append(true).open(with_extension(socket, &format!("slot{i}"))).ok()?;
            if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                return Some(SessionSlot(lock));
            }
        }
        sleep(RETRY).await;
    }
}

/// An exclusive flock on `path`, waited for up to `patience`.
async fn lock(path: &Path, patience: Duration) -> Option<Flock<File>> {
    let deadline = Instant::now() + patience;
    loop {
        let file = File::options().create(true).append(true).open(path).ok()?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Some(lock),
            Err(_) if Instant::now() < deadline => sleep(RETRY).await,
            Err(_) => return None,
        }
    }
}

fn with_extension(socket: &Path, extension: &str) -> PathBuf {
    socket.with_extension(extension)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private folder others could use is matched as such, and warned of in one line that says what to do.
    #[test]
    fn an_unsafe_folder_says_whose_it_must_be_and_what_to_do() {
        let unsafe_folder = NoFolder::Unsafe { dir: PathBuf::from("/tmp/ssh-exec-1000"), uid: 1000 };
        assert_eq!(
            unsafe_folder.to_string(),
            "/tmp/ssh-exec-1000 is not a folder of uid 1000 with mode 700, so it is not used for the shared \
             connection (someone else could take it over): remove it; connecting directly meanwhile"
        );
    }
}
