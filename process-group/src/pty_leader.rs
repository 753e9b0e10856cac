//! A command's leader on a pseudo-terminal (exec-server's TTY runs): the pty opened, the leader spawned
//! on it as its controlling terminal by the `pty-process` crate (setsid and TIOCSCTTY happen in that crate, not in
//! our code), and recorded as owned by tokio in the same step as any leader.
//!
//! The leader leads a new session, so it leads a new group too: pid = pgid = sid, and the rest of the policy (signal
//! the group, wait, reap) applies unchanged. `process_group(0)` must not be set on its command: setpgid would run
//! before the crate's setsid, and setsid refuses a group leader (EPERM).

use std::path::PathBuf;

use tokio::process::Command;

use crate::reaper;
use crate::{Leader, Pgid};

/// A pty pair: the master (ours) and the slave (the command's, given to [`spawn_pty_leader`]).
pub struct Pty {
    pub master: pty_process::Pty,
    pub slave: pty_process::Pts,
    /// The slave's path (`/dev/pts/N`), as the command's descriptors name it in `/proc/<pid>/fd`.
    pub path: PathBuf,
}

/// Opens a pty pair of `rows` × `cols`: the size is set before the command starts, so its first output is laid out
/// right.
///
/// *Why under the spawn lock:* pty-process opens the master without `O_CLOEXEC` and sets `FD_CLOEXEC` just after; a
/// command forked on another thread in between would keep the master for good (seen in 312 of 866 spawns under a
/// stress loop, none with the lock). Every spawn holds the lock for reading; this holds it for writing, for
/// microseconds.
pub fn open_pty(rows: u16, cols: u16) -> std::io::Result<Pty> {
    let (master, slave) = reaper::without_spawns(pty_process::open).map_err(pty_error)?;
    master.resize(pty_process::Size::new(rows, cols)).map_err(pty_error)?;
    let path = {
        use std::os::fd::{AsFd, AsRawFd};
        std::fs::read_link(format!("/proc/self/fd/{}", slave.as_fd().as_raw_fd()))?
    };
    Ok(Pty { master, slave, path })
}

/// Spawns `command` on `slave` as the leader of a new session (stdin, stdout and stderr on it, it as the controlling
/// terminal), recorded as owned by tokio in the same step, like [`crate::spawn_leader`].
pub fn spawn_pty_leader(command: Command, slave: pty_process::Pts) -> std::io::Result<Leader> {
    let (child, owned) = reaper::register(|| pty_process::Command::from(command).spawn(slave).map_err(pty_error))?;
    let pgid = child
        .id()
        .and_then(Pgid::led_by)
        .ok_or_else(|| std::io::Error::other("a command spawned a moment ago has no usable pid"))?;
    Ok(Leader::owned(child, pgid, owned))
}

/// The crate's error as an I/O error (what the spawn of a command reports).
fn pty_error(error: pty_process::Error) -> std::io::Error {
    match error {
        pty_process::Error::Io(error) => error,
        pty_process::Error::Rustix(errno) => errno.into(),
        other => std::io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// The leader leads its session and group, has the pty as its terminal (of the size given), and the master ends
    /// in EIO once it exits.
    #[tokio::test]
    async fn the_leader_leads_a_session_on_its_terminal() {
        let pty = open_pty(30, 100).unwrap();
        assert!(pty.path.starts_with("/dev/pts"), "{}", pty.path.display());
        let mut command = Command::new("sh");
        command.args(["-c", "stty size; ps -o sid=,pgid= -p $$; exit 7"]);
        let mut leader = spawn_pty_leader(command, pty.slave).unwrap();
        let pid = leader.pgid().get();
        let (mut reader, _writer) = pty.master.into_split();
        let mut screen = Vec::new();
        let mut buf = [0; 4096];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => screen.extend_from_slice(&buf[..n]),
                Err(err) if err.raw_os_error() == Some(nix::libc::EIO) => break,
                Err(err) => panic!("{err}"),
            }
        }
        let text = String::from_utf8(screen).unwrap();
        assert!(text.starts_with("30 100\r\n"), "the size, and the terminal's NL → CR NL: {text:?}");
        let mut lines = text.lines().skip(1);
        let ids: Vec<i32> = lines.next().unwrap().split_whitespace().map(|id| id.parse().unwrap()).collect();
        assert_eq!(ids, [pid, pid], "its own session and group");
        assert_eq!(leader.wait().await.unwrap().code(), Some(7));
    }
}
