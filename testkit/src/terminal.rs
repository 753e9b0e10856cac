//! A terminal opened by a test (for TTY runs): a pty pair whose slave is a program's controlling terminal, the test
//! typing on the master and reading the screen from it, resizing it, and reading the slave's modes. The same pair
//! runs a program natively (to compare against) and a client (to drive it as a user at a terminal would).

use std::path::PathBuf;
use std::time::Duration;

use process_group::Leader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// How long [`Session::wait_for`] waits for what should appear on the screen before the test fails.
pub const SCREEN_WAIT: Duration = Duration::from_secs(30);

/// A pty pair of a given size, before a program runs on it.
pub struct Terminal {
    pty: process_group::Pty,
}

impl Terminal {
    /// A `rows` × `cols` pty pair.
    pub fn open(rows: u16, cols: u16) -> Self {
        Terminal { pty: process_group::open_pty(rows, cols).expect("a pty pair") }
    }

    /// `stty -a` of the slave (its first line, the speed and size, left out: the size is not a mode).
    pub fn modes(&self) -> String {
        stty_modes(&self.pty.path)
    }

    /// Starts `command` with the slave as its controlling terminal and stdin, stdout and stderr (the test keeps no
    /// slave descriptor, so the screen ends when the program and everything it started have closed it).
    pub fn spawn(self, command: tokio::process::Command) -> Session {
        let process_group::Pty { master, slave, path } = self.pty;
        let leader = process_group::spawn_pty_leader(command, slave).expect("a program on the pty");
        let (mut output, input) = master.into_split();
        let (shown, screen) = watch::channel(Screen::default());
        tokio::spawn(async move {
            let mut buffer = vec![0; 64 * 1024];
            loop {
                // EIO is how a pty's master says every slave descriptor is closed (never a zero read on Linux).
                let n = output.read(&mut buffer).await.unwrap_or(0);
                shown.send_modify(|screen| match n {
                    0 => screen.ended = true,
                    n => screen.bytes.extend_from_slice(&buffer[..n]),
                });
                if n == 0 {
                    return;
                }
            }
        });
        Session { leader, input, screen, path }
    }
}

/// What the master has read so far.
#[derive(Debug, Default, Clone)]
struct Screen {
    bytes: Vec<u8>,
    ended: bool,
}

/// A program running on a test's terminal.
pub struct Session {
    leader: Leader,
    input: pty_process::OwnedWritePty,
    screen: watch::Receiver<Screen>,
    path: PathBuf,
}

impl Session {
    /// The program's pid.
    pub fn pid(&self) -> i32 {
        self.leader.pgid().get()
    }

    /// Types `keys` (as bytes: `\r` is Enter, `\x03` Ctrl-C, `\x04` Ctrl-D).
    pub async fn press(&mut self, keys: &[u8]) {
        self.input.write_all(keys).await.expect("typing on the terminal");
    }

    /// Resizes the terminal (TIOCSWINSZ on the master): the kernel sends SIGWINCH to its foreground group.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.input.resize(pty_process::Size::new(rows, cols)).expect("resizing the terminal");
    }

    /// Waits until `needle` is on the screen at or after `from`; where it ends.
    pub async fn wait_for(&mut self, needle: &str, from: usize) -> usize {
        let needle = needle.as_bytes();
        let found = |screen: &Screen| {
            let bytes = &screen.bytes[from.min(screen.bytes.len())..];
            match needle.len() {
                0 => Some(from),
                n => bytes.windows(n).position(|w| w == needle).map(|at| from + at + n),
            }
        };
        let waited =
            tokio::time::timeout(SCREEN_WAIT, self.screen.wait_for(|s| found(s).is_some() || s.ended)).await.is_ok();
        let screen = self.screen.borrow().clone();
        match (waited, found(&screen)) {
            (_, Some(end)) => end,
            (true, None) => panic!("the screen ended before {:?}: {:?}", text(needle), text(&screen.bytes)),
            (false, None) => panic!("{:?} never came: {:?}", text(needle), text(&screen.bytes)),
        }
    }

    /// The screen so far.
    pub fn screen(&self) -> Vec<u8> {
        self.screen.borrow().bytes.clone()
    }

    /// `stty -a` of the terminal now (see [`Terminal::modes`]).
    pub fn modes(&self) -> String {
        stty_modes(&self.path)
    }

    /// Waits for the program to exit and the screen to end: what it left.
    pub async fn finish(mut self) -> Ended {
        let status = tokio::time::timeout(SCREEN_WAIT, self.leader.wait()).await.expect("the program exits").unwrap();
        let _ = tokio::time::timeout(SCREEN_WAIT, self.screen.wait_for(|s| s.ended)).await.expect("the screen ends");
        let (code, _) = process_group::exit_code_of(status);
        Ended { code, screen: self.screen(), modes: self.modes() }
    }
}

/// A program's end on a test's terminal.
#[derive(Debug)]
pub struct Ended {
    /// Its exit code (128 + N for a signal).
    pub code: i32,
    /// Everything it showed.
    pub screen: Vec<u8>,
    /// The terminal's modes it left (see [`Terminal::modes`]).
    pub modes: String,
}

/// The x86_64 system calls a program waits for input in: read, poll, select, epoll_wait, pselect6, ppoll,
/// epoll_pwait.
const WAITING_FOR_INPUT: &[&str] = &["0", "7", "23", "232", "270", "271", "281"];

/// Waits until a process whose command line holds `marker` is blocked waiting for input: a program that put its
/// prompt up and is ready for the next key. *Why:* seeing the prompt is not enough. CPython's signal handler only
/// sets a flag, which its readline loop (and a plain `read`) looks at when `pselect6`/`read` returns EINTR; a
/// Ctrl-C's SIGINT (or a resize's SIGWINCH) that lands between the prompt's last `write` and that call leaves it
/// blocked until the next key (natively too), so a test that types as soon as the prompt shows races it.
///
/// Only the command counts, never the client forwarding it: the client's command line holds the command's (marker
/// included) and it sleeps in `epoll_wait` from its start, so counting it let a forwarded test type before the remote
/// command read, and CPython, given a Ctrl-C before its `pselect6`, waited for a next key that never came.
pub async fn wait_until_reading(marker: &str) {
    let reading = || {
        crate::processes_matching(marker)
            .into_iter()
            .filter_map(|pid| i32::try_from(pid).ok())
            .any(|pid| !forwards(pid) && waits_for_input(pid))
    };
    tokio::task::block_in_place(|| crate::wait_until(&format!("a process {marker} waiting for input"), reading));
}

/// The programs that forward a command rather than run it (see [`wait_until_reading`]).
const FORWARDERS: &[&str] = &["sidecar-exec", "ssh-exec", "ssh"];

/// Whether process `pid` runs one of the [`FORWARDERS`] (by its executable, which a wrapper link's name does not hide).
fn forwards(pid: i32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|exe| exe.file_name().and_then(|name| name.to_str()).map(|name| FORWARDERS.contains(&name)))
        .unwrap_or(false)
}

/// Whether process `pid` is blocked in one of the system calls a program waits for input in (see
/// [`wait_until_reading`] for why a test that types needs this). *Why its state too:* `/proc/PID/syscall` names the
/// call a runnable process was preempted in as well, and under load that is often a `read` of a file it is loading
/// (CPython's modules, its history file), long before it waits for a key; only a sleeping one is waiting.
pub fn waits_for_input(pid: i32) -> bool {
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let in_a_wait = syscall.split(' ').next().is_some_and(|number| WAITING_FOR_INPUT.contains(&number));
    in_a_wait && process_group::procfs::stat(pid).is_some_and(|stat| stat.state == 'S')
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn stty_modes(path: &std::path::Path) -> String {
    let output = std::process::Command::new("stty").arg("-a").arg("-F").arg(path).output().expect("stty runs");
    assert!(output.status.success(), "stty -a -F {}: {}", path.display(), text(&output.stderr));
    text(&output.stdout).lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// `argv` run natively on a `rows` × `cols` terminal with `TERM=xterm-256color`, nothing typed: its exit code and
/// screen, to compare a forwarded run's against.
pub async fn native_on_a_pty(argv: &[&str], rows: u16, cols: u16) -> (Vec<u8>, i32) {
    let mut command = tokio::process::Command::new(argv[0]);
    command.args(&argv[1..]).env("TERM", "xterm-256color");
    let ended = Terminal::open(rows, cols).spawn(command).finish().await;
    (ended.screen, ended.code)
}
