//! The sockets HTTP is served on: TCP, and UNIX sockets (`--listen unix:/path`) for containers of a pod that share
//! a volume and should reach the builder without any TCP exposure. Both are served by the same connection loop,
//! with the same limits.
//!
//! A UNIX socket is created with `--socket-mode` (0660 by default: the owner and its group), replaces a stale
//! socket file left by a server that died (but never a live one, nor a file that is not a socket), and is removed
//! when the server stops.

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
    pub async fn accept_any(listeners: &[Listener]) -> std::io::Result<Stream> {
        std::future::poll_fn(|cx| {
            for listener in listeners {
                let polled = match listener {
                    Listener::Tcp(tcp) => tcp.poll_accept(cx).map_ok(|(stream, _)| Stream::Tcp(stream)),
                    Listener::Unix(unix) => unix.listener.poll_accept(cx).map_ok(|(stream, _)| Stream::Unix(stream)),
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
    /// Binds `path` with `mode`, replacing a stale socket file.
    pub fn bind(path: &Path, mode: u32) -> Result<Self, SocketError> {
        let io = |step: &'static str| move |source| SocketError::Io { step, path: path.to_path_buf(), source };
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(SocketError::NotASocket { path: path.to_path_buf() });
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse { path: path.to_path_buf() });
            }
            std::fs::remove_file(path).map_err(io("replace the stale"))?;
        }
        let listener = UnixListener::bind(path).map_err(io("create"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io("set the mode of"))?;
        let inode = std::fs::metadata(path).map_err(io("look at"))?.ino();
        Ok(UnixSocket { listener, path: path.to_owned(), inode })
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
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Unix(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Unix(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Stream::Unix(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(stream) => stream.is_write_vectored(),
            Stream::Unix(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Unix(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Unix(stream) => Pin::new(stream).poll_shutdown(cx),
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
    }
}
