//! The local terminal in a TTY run: raw while the run has it, restored on every way out (the run's end, an error,
//! a signal, a panic), and cooked while the client is stopped.
//!
//! The saved modes live in a static: rustix's `Termios` is plain data, so the panic hook reads it without a lock
//! (a release build aborts on panic, and no `Drop` runs then; the hook does, before the abort).
//!
//! *A panic while raw ends the client, in a debug build too.* The hook restores the modes, sends the screen reset
//! ([`super::SCREEN_RESET`]), lets the previous hook print the message on the cooked terminal, and aborts. A release
//! build aborts anyway; a debug build would unwind, and a panic on one of the client's threads (the stdin reader,
//! the SSE reader) would then end only that thread: the client would run on with the terminal cooked and no key
//! forwarded. Aborting makes both builds end alike (SIGABRT, the remote run left to the reattach window, as after
//! SIGKILL), and makes the tests of the debug build prove what a user's release build does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rustix::termios::{tcgetattr, tcsetattr, OptionalActions, Termios};

/// The modes the terminal had before the client made it raw.
static SAVED: OnceLock<Termios> = OnceLock::new();

/// Whether the terminal is raw now (so that a restore when it is not does nothing).
static RAW: AtomicBool = AtomicBool::new(false);

/// Makes stdin's terminal raw and installs the panic hook that restores it. Nothing when stdin is not a terminal
/// (`SIDECAR_TTY=1` without one). *Why `Drain` on the way in:* it keeps the keys typed before the client started
/// (ssh does the same).
pub fn enter() -> std::io::Result<()> {
    let Ok(saved) = tcgetattr(std::io::stdin()) else { return Ok(()) };
    let saved = SAVED.get_or_init(|| saved);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let was_raw = restore();
        if was_raw {
            reset_screen();
        }
        previous(info);
        if was_raw {
            std::process::abort();
        }
    }));
    go_raw(saved)
}

fn go_raw(saved: &Termios) -> std::io::Result<()> {
    let mut raw = saved.clone();
    raw.make_raw();
    tcsetattr(std::io::stdin(), OptionalActions::Drain, &raw)?;
    RAW.store(true, Ordering::SeqCst);
    Ok(())
}

/// Puts the saved modes back; idempotent: whether the terminal was raw. *Why `Now`:* a restore that drains could
/// block for ever when nobody reads the terminal's output (a stopped terminal emulator).
pub fn restore() -> bool {
    match (SAVED.get(), RAW.swap(false, Ordering::SeqCst)) {
        (Some(saved), true) => {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
            true
        }
        _ => false,
    }
}

/// [`super::SCREEN_RESET`] on stdout, if it is a terminal, written on the descriptor itself: a panic may come while
/// a thread holds stdout's lock.
fn reset_screen() {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        let _ = nix::unistd::write(std::io::stdout(), super::SCREEN_RESET.as_bytes());
    }
}

/// Runs `stop` (the client stopping itself) with the terminal cooked, as the shell that continues it expects, and
/// raw again afterwards if it was raw before.
pub fn cooked_while(stop: impl FnOnce()) {
    let was_raw = RAW.load(Ordering::SeqCst);
    restore();
    stop();
    if let (true, Some(saved)) = (was_raw, SAVED.get()) {
        let _ = go_raw(saved);
    }
}
