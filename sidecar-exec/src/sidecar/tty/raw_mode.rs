//! The local terminal in a TTY run: raw while the run has it, restored on every way out (the run's end, an error,
//! a signal, a panic), and cooked while the client is stopped.
//!
//! The saved modes live in a static: rustix's `Termios` is plain data, so the panic hook reads it without a lock
//! (a release build aborts on panic, and no `Drop` runs then; the hook does, before the abort).

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
        restore();
        previous(info);
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

/// Puts the saved modes back; idempotent. *Why `Now`:* a restore that drains could block for ever when nobody reads
/// the terminal's output (a stopped terminal emulator).
pub fn restore() {
    if let (Some(saved), true) = (SAVED.get(), RAW.swap(false, Ordering::SeqCst)) {
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
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
