//! The local terminal in a TTY run: raw while the run has it, restored on every way out (the run's end, an error,
//! a signal, a panic), and cooked while the client is stopped.
//!
//! The saving and restoring are the guard both programs share ([`crate::terminal_guard`]: a static the panic hook
//! reads, a restore at once); this is what sidecar-exec does with the terminal between.
//!
//! *A panic while raw ends the client, in a debug build too.* The hook restores the modes, sends the screen reset
//! ([`super::SCREEN_RESET`]), lets the previous hook print the message on the cooked terminal, and aborts. A release
//! build aborts anyway; a debug build would unwind, and a panic on one of the client's threads (the stdin reader,
//! the SSE reader) would then end only that thread: the client would run on with the terminal cooked and no key
//! forwarded. Aborting makes both builds end alike (SIGABRT, the remote run left to the reattach window, as after
//! SIGKILL), and makes the tests of the debug build prove what a user's release build does.

use std::sync::atomic::{AtomicBool, Ordering};

use rustix::termios::{tcsetattr, OptionalActions, Termios};

use crate::terminal_guard::{self, OnPanic};

/// Whether the raw terminal still turns Ctrl-C, Ctrl-\ and Ctrl-Z into signals to the client (ISIG on): from
/// [`enter`] until a reply head says the command has a terminal of its own ([`keys_to_the_command`]).
static SIGNALS_HERE: AtomicBool = AtomicBool::new(true);

/// Makes stdin's terminal raw, with ISIG left on, and installs the panic hook that restores it. Nothing when stdin is
/// not a terminal (`SIDECAR_TTY=1` without one). *Why `Drain` on the way in:* it keeps the keys typed before the
/// client started (ssh does the same). *Why ISIG stays on until the reply head:* until then there is no remote
/// terminal to take Ctrl-C, so the keyboard must still interrupt the client, as it interrupts a native program
/// that waits (a server that does not answer must not hold the user until a deadline); raw otherwise, so keys typed
/// during the round trip are kept for the command.
pub fn enter() -> std::io::Result<()> {
    enter_with(true)
}

/// [`enter`] for a run already known to be on a terminal (`--attach` to one): every key is the command's at once.
pub fn enter_for_the_command() -> std::io::Result<()> {
    enter_with(false)
}

fn enter_with(signals_here: bool) -> std::io::Result<()> {
    SIGNALS_HERE.store(signals_here, Ordering::SeqCst);
    let on_panic = OnPanic { screen_reset: Some(super::SCREEN_RESET), abort: true };
    let Some(saved) = terminal_guard::save(on_panic) else { return Ok(()) };
    go_raw(saved)
}

fn go_raw(saved: &Termios) -> std::io::Result<()> {
    terminal_guard::take(&raw_of(saved), OptionalActions::Drain)
}

/// The raw modes made of `saved`: ISIG kept while [`SIGNALS_HERE`].
fn raw_of(saved: &Termios) -> Termios {
    let mut raw = saved.clone();
    raw.make_raw();
    if SIGNALS_HERE.load(Ordering::SeqCst) {
        raw.local_modes.insert(rustix::termios::LocalModes::ISIG);
    }
    raw
}

/// A reply head said the command runs on a terminal: ISIG goes off, so Ctrl-C, Ctrl-\ and Ctrl-Z are bytes for the
/// remote line discipline. Once only; nothing when the terminal is not raw. *Why `Now`:* keys already typed stay
/// queued for the command.
pub fn keys_to_the_command() {
    if !SIGNALS_HERE.swap(false, Ordering::SeqCst) || !is_raw() {
        return;
    }
    if let Some(saved) = terminal_guard::saved() {
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &raw_of(saved));
    }
}

/// Whether the terminal is raw now: a line the client prints then needs its own carriage return (raw mode turns
/// off the output processing that adds it).
pub fn is_raw() -> bool {
    terminal_guard::is_taken()
}

/// Prints `line` on stderr as one line whatever the terminal's mode: ending `\r\n` while raw, `\n` otherwise.
pub fn eprint_line(line: &str) {
    use std::io::Write;
    let end = if is_raw() { "\r\n" } else { "\n" };
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "{line}{end}");
    let _ = stderr.flush();
}

/// Puts the saved modes back, at once ([`crate::terminal_guard::restore`]); idempotent: whether the terminal was raw.
pub fn restore() -> bool {
    terminal_guard::restore()
}

/// Runs `stop` (the client stopping itself) with the terminal cooked, as the shell that continues it expects, and
/// raw again afterwards if it was raw before.
pub fn cooked_while(stop: impl FnOnce()) {
    let was_raw = is_raw();
    restore();
    stop();
    if let (true, Some(saved)) = (was_raw, terminal_guard::saved()) {
        let _ = go_raw(saved);
    }
}
