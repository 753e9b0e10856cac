//! TTY mode: when stdin and stdout are terminals (or `SIDECAR_TTY=1`), the command runs on a remote
//! pseudo-terminal of the local window's size, `TERM` and modes; the local terminal is raw ([`raw_mode`]), every
//! keystroke goes as it comes through the streamed stdin of [`crate::sidecar::stdin::pump`], the window size follows
//! SIGWINCH ([`window`]), and the output is the run's one stream, resumed like any named run's. These are the
//! terminal's parts; the call on it is [`crate::sidecar::call::forward::on_terminal`].

pub(crate) mod panic_on_request;
pub(crate) mod raw_mode;
pub(crate) mod window;

use protocol::{TerminalModes, TtyRequest};

/// The request's `tty`: the local window size, `TERM` (absent when unset: the server's default then) and stdin's
/// terminal modes, as ssh's `pty-req` carries them (absent when stdin is no terminal: `SIDECAR_TTY=1` without one).
/// Called before [`crate::sidecar::call::forward::on_terminal`] makes the terminal raw, so the modes are the ones the
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

/// Says so, in one line, when the local terminal is in the raw state a client killed while raw leaves behind (no
/// line editing, no signal keys, no echo): the command gets the terminal's modes as they are.
///
/// *Decision: a note, not sane modes.* The remote terminal gets the local terminal's modes ([`request`]), as ssh
/// gives them, so that a command behaves as it would natively on this terminal; a terminal raw on purpose (an
/// `expect` script, `stty raw -echo` before a tool that reads keys) must stay so, and only the user can tell a
/// terminal left raw by a crash from one made raw on purpose. The note names the cure (`stty sane`), and the terminal
/// is left as it was found afterwards. Only `-icanon -isig -echo` together counts: `stty -echo` alone (a password
/// prompt's script) is a normal terminal and gets no note.
pub fn note_a_terminal_left_raw() {
    use rustix::termios::{LocalModes, OutputModes};
    let Ok(modes) = rustix::termios::tcgetattr(std::io::stdin()) else { return };
    let raw = !modes.local_modes.intersects(LocalModes::ICANON | LocalModes::ISIG | LocalModes::ECHO);
    if raw {
        let end = if modes.output_modes.contains(OutputModes::OPOST) { "\n" } else { "\r\n" };
        eprint!(
            "sidecar-exec: this terminal is raw (-icanon -isig -echo), as a program killed while it had the terminal \
             raw leaves it, and the command gets it so; run `stty sane` (or `reset`) if that was not meant{end}"
        );
    }
}
