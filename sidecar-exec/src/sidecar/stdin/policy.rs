//! stdin, the policy of both clients: what is forwarded (a regular file always; a pipe or terminal only when asked),
//! and the hint when a pipe holding data is left unread. How it travels is each program's: sidecar-exec reads it
//! into its request ([`crate::sidecar::stdin::whole`]), ssh-exec hands it to ssh, which streams it.

use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;

/// The hint for an unread pipe holding data (stdin is a [`StdinKind::Pipe`] not [`forwarded`], and
/// [`has_data_now`]): `echo x | sidecar-exec python cat` would otherwise drop the `x` silently. `variable` is the
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

/// Whether stdin has data ready right now: a poll that never waits. The client asks before forwarding and, if not
/// yet, once more after (`echo x | sidecar-exec …` may not have written when the client starts).
pub fn has_data_now() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|ready| ready > 0)
        && fds[0].revents().is_some_and(|events| events.contains(PollFlags::POLLIN))
}
