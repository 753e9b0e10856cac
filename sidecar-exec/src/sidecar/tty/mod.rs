//! TTY mode (issue 23): when stdin and stdout are terminals (or `SIDECAR_TTY=1`), the command runs on a remote
//! pseudo-terminal of the local window's size, `TERM` and modes; the local terminal is raw ([`raw_mode`]), every
//! keystroke goes as it comes through the streamed stdin of [`crate::sidecar::stdin_pump`], the window size follows
//! SIGWINCH ([`window`]), and the output is the run's one stream, resumed like any named run's. These are the
//! terminal's parts; the call on it is [`crate::sidecar::forward::on_terminal`].

pub mod panic_on_request;
pub mod raw_mode;
pub mod window;

use protocol::{TerminalModes, TtyRequest};

/// The request's `tty`: the local window size, `TERM` (absent when unset: the server's default then) and stdin's
/// terminal modes, as ssh's `pty-req` carries them (absent when stdin is no terminal: `SIDECAR_TTY=1` without one).
/// Called before [`crate::sidecar::forward::on_terminal`] makes the terminal raw, so the modes are the ones the
/// user's shell left.
pub fn request() -> TtyRequest {
    let size = window::size();
    TtyRequest {
        rows: size.rows,
        cols: size.cols,
        term: std::env::var("TERM").ok().filter(|term| !term.is_empty()),
        modes: rustix::termios::tcgetattr(std::io::stdin()).ok().map(|modes| TerminalModes::of(&modes)),
    }
}

/// What a client that gives up leaves switched on in the user's terminal emulator when the remote full-screen
/// program was cut off: the alternate screen, a hidden cursor, bracketed paste, mouse reporting, keypad mode. Sent
/// only when the client ends without the command's exit (the program cleans up after itself otherwise).
pub const SCREEN_RESET: &str = "\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1006l\x1b>";
