//! The sockets HTTP is served on: TCP, and UNIX sockets (`--listen unix:/path`) for containers of a pod that share
//! a volume and should reach the builder without any TCP exposure. Both are served by the same connection loop,
//! with the same limits.
//!
//! A UNIX socket is created with `--socket-mode` (0660 by default: the owner and its group) in a private folder and
//! renamed into place, replaces a stale socket file left by a server that died (but never a live one, nor a file
//! that is not a socket), and is removed when the server stops.

use std::io::IoSlice;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixSocket),
}

impl Listener {
    /// Accepts from any of `listeners`, the first ready first.
    pub async fn accept_any(listeners: &[Listener]) -> std::io::Result<Accepted> {
        std::future::poll_fn(|cx| {
            for listener in listeners {
                let polled = match listener {
                    Listener::Tcp(tcp) => tcp.poll_accept(cx).map_ok(|(stream, _)| Accepted::Tcp(stream)),
                    Listener::Unix(unix) => unix.listener.poll_accept(cx).map_ok(|(stream, _)| Accepted::Unix(stream)),
                };
                if polled.is_ready() {
                    return polled;
                }
            }
            Poll::Pending
        })
        .await
    }

    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Listener::Tcp(tcp) => tcp.local_addr().ok(),
            Listener::Unix(_) => None,
        }
    }

    pub fn unix_path(&self) -> Option<String> {
        match self {
            Listener::Tcp(_) => None,
            Listener::Unix(unix) => Some(format!("unix:{}", unix.path.display())),
        }
    }
}

/// The longest path a UNIX socket address holds (`sun_path` is 108 bytes, with its NUL).
const MAX_PATH: usize = 107;

/// A UNIX socket this server created; its file is removed when this is dropped (if it is still ours).
#[derive(Debug)]
pub struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
    inode: u64,
}

/// Why a `--listen` address cannot be served.
#[derive(Debug)]
pub enum SocketError {
    /// Not `unix:PATH`.
    NotUnix { given: String },
    /// `unix:` with a relative path.
    Relative { given: String },
    /// Something that is not a socket is at the path.
    NotASocket { path: PathBuf },
    /// Longer than a socket address holds: clients could not connect to it.
    TooLong { path: PathBuf },
    /// A live server answers on the socket there.
    InUse { path: PathBuf },
    /// A step of making the socket failed (`step`: what was being done).
    Io { step: &'static str, path: PathBuf, source: std::io::Error },
}

impl std::fmt::Display for SocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketError::NotUnix { given } => {
                write!(f, "--listen {given:?}: expected unix:/path/to.sock (TCP is --host and --port)")
            }
            SocketError::Relative { given } => {
                let path = given.strip_prefix("unix:").unwrap_or(given);
                write!(f, "--listen {given:?}: the socket path must be absolute (unix:/run/exec.sock), got {path:?}")
            }
            SocketError::NotASocket { path } => {
                write!(f, "{} exists and is not a socket: remove it or choose another path", path.display())
            }
            SocketError::InUse { path } => write!(f, "{} is in use by a running server", path.display()),
            SocketError::TooLong { path } => write!(
                f,
                "{} is {} bytes long; a UNIX socket path holds at most {MAX_PATH} (the kernel's limit): choose a \
                 shorter one",
                path.display(),
                path.as_os_str().len()
            ),
            SocketError::Io { step, path, source } => {
                write!(f, "cannot {step} UNIX socket {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for SocketError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SocketError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl UnixSocket {
    /// Binds `path` with `mode`, replacing a stale socket file. The socket is made in a private folder (mode 0700,
    /// created beside `path`, so on the same file system), given `mode` there, and renamed into place: at `path` it
    /// is never reachable with another mode, and no step acts on `path` but the rename (a chmod by path would follow
    /// a symlink put there meanwhile). The rename also replaces a stale socket in one step.
    pub fn bind(path: &Path, mode: u32) -> Result<Self, SocketError> {
        let io = |step: &'static str| move |source| SocketError::Io { step, path: path.to_path_buf(), source };
        // Made elsewhere and renamed, the socket could take any path; only one a client can connect to will do.
        if path.as_os_str().len() > MAX_PATH {
            return Err(SocketError::TooLong { path: path.to_path_buf() });
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(SocketError::NotASocket { path: path.to_path_buf() });
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse { path: path.to_path_buf() });
            }
        }
        let staging =
            Staging::create(path.parent().unwrap_or(Path::new("/"))).map_err(io("make a private folder for the"))?;
        let staged = staging.socket();
        let listener = UnixListener::bind(&staged).map_err(io("create"))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode)).map_err(io("set the mode of"))?;
        let inode = std::fs::symlink_metadata(&staged).map_err(io("look at"))?.ino();
        std::fs::rename(&staged, path).map_err(io("move into place the"))?;
        Ok(UnixSocket { listener, path: path.to_owned(), inode })
    }
}

/// The private folder a socket is made in before it is moved into place: mode 0700, named
/// `.exec-server-PID-RANDOM` beside the socket's path, removed with whatever is left in it when dropped.
struct Staging {
    dir: PathBuf,
    /// Held open so the socket can be named through `/proc/self/fd`: a path as short as the kernel's limit on socket
    /// paths (108 bytes) allows, whatever the folder's own path.
    handle: std::fs::File,
}

impl Staging {
    fn create(parent: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        for attempt in 0..100u32 {
            // Unguessable, like the state folder's name, so no other user can take it first.
            let random = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), attempt);
            let dir = parent.join(format!(".exec-server-{}-{random:016x}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let handle = std::fs::File::open(&dir).inspect_err(|_| {
                        let _ = std::fs::remove_dir(&dir);
                    })?;
                    return Ok(Staging { dir, handle });
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        }
        Err(std::io::Error::other("no free name for a private folder beside the socket"))
    }

    /// Where the socket is made.
    fn socket(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/socket", self.handle.as_raw_fd()))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // The socket when it was not moved into place (a step failed), then the folder.
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        // Another server may have replaced it since: only our own file goes.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|meta| meta.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `unix:/path` → the path; anything else is not a socket address this server knows.
pub fn parse_listen(text: &str) -> Result<PathBuf, SocketError> {
    match text.strip_prefix("unix:") {
        Some(path) if path.starts_with('/') => Ok(PathBuf::from(path)),
        Some(_) => Err(SocketError::Relative { given: text.to_owned() }),
        None => Err(SocketError::NotUnix { given: text.to_owned() }),
    }
}

/// One accepted connection.
#[derive(Debug)]
pub enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Accepted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Accepted::Tcp(stream) => Pin::new(stream).poll_read(cx, buf),
            Accepted::Unix(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Accepted::Tcp(stream) => Pin::new(stream).poll_write(cx, buf),
            Accepted::Unix(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Accepted::Tcp(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Accepted::Unix(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Accepted::Tcp(stream) => stream.is_write_vectored(),
            Accepted::Unix(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Accepted::Tcp(stream) => Pin::new(stream).poll_flush(cx),
            Accepted::Unix(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Accepted::Tcp(stream) => Pin::new(stream).poll_shutdown(cx),
            Accepted::Unix(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen("unix:/run/exec.sock").unwrap(), PathBuf::from("/run/exec.sock"));
        assert!(matches!(parse_listen("unix:relative.sock"), Err(SocketError::Relative { .. })));
        assert!(matches!(parse_listen("127.0.0.1:8080"), Err(SocketError::NotUnix { .. })));
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_a_live_one_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec.sock");
        let first = UnixSocket::bind(&path, 0o660).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o660);
        let in_use = UnixSocket::bind(&path, 0o660).unwrap_err();
        assert!(matches!(in_use, SocketError::InUse { .. }) && in_use.to_string().contains("in use"));
        drop(first);
        assert!(!path.exists(), "removed when the server stops");
        // A socket file whose server is gone (as after a SIGKILL).
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let second = UnixSocket::bind(&path, 0o600).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(second);
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "x").unwrap();
        let not_a_socket = UnixSocket::bind(&plain, 0o660).unwrap_err();
        assert!(matches!(not_a_socket, SocketError::NotASocket { .. }));
        assert!(not_a_socket.to_string().contains("not a socket"));
        // Made in a private folder and renamed, the socket could take a path no client can connect to: refused.
        let long = dir.path().join("s".repeat(MAX_PATH - dir.path().as_os_str().len()));
        let too_long = UnixSocket::bind(&long, 0o660).unwrap_err();
        assert!(matches!(too_long, SocketError::TooLong { .. }) && !long.exists(), "{too_long}");
        let longest = dir.path().join("s".repeat(MAX_PATH - 1 - dir.path().as_os_str().len()));
        let at_the_limit = UnixSocket::bind(&longest, 0o660).unwrap();
        assert!(std::os::unix::net::UnixStream::connect(&longest).is_ok(), "a client reaches it");
        drop(at_the_limit);
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|entry| !entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".exec-server")));
    }
}
