//! stdin: what is forwarded (a regular file always; a pipe or terminal only when asked), how much fits, and the
//! hint when a pipe holding data is left unread.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;

use std::fmt;

/// The most stdin one request carries: 768 KiB, 3/4 of the 1 MiB body limit. stdin travels as base64
/// (`stdin_b64`), 4 bytes for every 3 whatever they are; as JSON text a newline would cost 2 bytes and a control
/// byte 6, so the limit would depend on the content. The rest of the request (argv, cwd, env) must fit beside it:
/// [`crate::sidecar::request::body`] checks the whole before sending.
pub const MAX_STDIN_BYTES: usize = protocol::MAX_BODY_BYTES / 4 * 3;

/// What the client does with its stdin.
#[derive(Debug)]
pub struct Stdin {
    /// The bytes to forward, when stdin is forwarded.
    pub bytes: Option<Vec<u8>>,
    /// stdin is a pipe (or socket) that is not forwarded: if it holds data ([`has_data_now`]), that is worth one
    /// hint, since `echo x | sidecar-exec python cat` would otherwise drop the `x` silently.
    pub unread_pipe: bool,
}

/// The hint for an unread pipe holding data ([`Stdin::unread_pipe`] and [`has_data_now`]); `variable` is the
/// client's switch (SIDECAR_STDIN, SSH_STDIN).
pub fn unread_hint(variable: &str) -> String {
    format!(
        "stdin is a pipe holding data, which is not forwarded by default (agents often run commands on a pipe that \
         never closes): set {variable}=1 to send it to the command, or redirect from a file"
    )
}

/// What stdin is, which decides whether it is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinKind {
    /// A regular file (`< input.txt`): always forwarded, it ends.
    File,
    /// A pipe or socket: forwarded only when asked, it may never close.
    Pipe,
    /// A terminal, /dev/null, or closed: forwarded only when asked.
    Other,
}

/// What our stdin is, from fstat.
pub fn kind() -> StdinKind {
    let stdin = std::io::stdin();
    let file_type = stdin
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| std::fs::File::from(fd).metadata().ok())
        .map(|meta| meta.file_type());
    match file_type {
        Some(t) if t.is_file() => StdinKind::File,
        Some(t) if t.is_fifo() || t.is_socket() => StdinKind::Pipe,
        _ => StdinKind::Other,
    }
}

/// The stdin policy of both clients: a regular file is forwarded, a pipe or terminal only when `forward_pipe`
/// (SIDECAR_STDIN=1, SSH_STDIN=1), since reading a pipe that never closes would hang.
pub fn forwarded(kind: StdinKind, forward_pipe: bool) -> bool {
    kind == StdinKind::File || forward_pipe
}

/// Reads stdin when it is to be forwarded ([`forwarded`]), at most [`MAX_STDIN_BYTES`].
pub fn read(forward_pipe: bool) -> Result<Stdin, StdinError> {
    let kind = kind();
    if !forwarded(kind, forward_pipe) {
        return Ok(Stdin { bytes: None, unread_pipe: kind == StdinKind::Pipe });
    }
    let stdin = std::io::stdin();
    let mut bytes = Vec::new();
    stdin.lock().take(MAX_STDIN_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(StdinError::Unreadable)?;
    if bytes.len() > MAX_STDIN_BYTES {
        return Err(StdinError::TooLarge);
    }
    Ok(Stdin { bytes: Some(bytes), unread_pipe: false })
}

/// Whether stdin has data ready right now: a poll that never waits. The client asks before forwarding and, if not
/// yet, once more after (`echo x | sidecar-exec …` may not have written when the client starts).
pub fn has_data_now() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|ready| ready > 0)
        && fds[0].revents().is_some_and(|events| events.contains(PollFlags::POLLIN))
}

/// Why stdin cannot be forwarded.
#[derive(Debug)]
pub enum StdinError {
    Unreadable(std::io::Error),
    /// More than [`MAX_STDIN_BYTES`].
    TooLarge,
}

impl fmt::Display for StdinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StdinError::Unreadable(err) => write!(f, "cannot read stdin: {err}"),
            StdinError::TooLarge => write!(
                f,
                "stdin is larger than 768 KiB ({MAX_STDIN_BYTES} bytes), more than one request can carry (the body \
                 limit is 1 MiB and stdin travels as base64): write it to a file in the shared workspace and pass the \
                 file's path instead"
            ),
        }
    }
}

impl std::error::Error for StdinError {}
