//! The one guard of the local terminal, for both programs: stdin's terminal modes saved before a call takes the
//! terminal, and put back on every way out (the call's end, an error, a signal, a panic). sidecar-exec takes it
//! itself (its TTY mode makes it raw: `crate::sidecar::tty::raw_mode`); ssh-exec's `ssh -tt` does ([`Restore`]).
//!
//! The saved modes live in a static: rustix's `Termios` is plain data, so the panic hook reads it without a lock
//! (a release build aborts on panic, and no `Drop` runs then; the hook does, before the abort).
//!
//! *A restore is at once (`TCSANOW`), never draining (`TCSADRAIN`):* a restore that waits for the output to drain
//! blocks for ever when nobody reads the terminal's output (a stopped terminal emulator, a terminal whose flow
//! control is off), and the client would hang on its way out. What was written before is shown anyway; only its
//! output processing may differ for the bytes still queued.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rustix::termios::{tcgetattr, tcsetattr, OptionalActions, Termios};

/// The modes the terminal had before the client took it: the first save's (a client saves once per call, and a
/// later save would find the modes the call set).
static SAVED: OnceLock<Termios> = OnceLock::new();

/// Whether the terminal is taken now (not in the saved modes), so that a restore when it is not does nothing.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// What the panic hook does besides restoring the modes (only when the terminal was taken).
#[derive(Debug, Clone, Copy)]
pub struct OnPanic {
    /// Written on stdout, when it is a terminal, after the restore (sidecar-exec's screen reset).
    pub screen_reset: Option<&'static str>,
    /// End the process after the previous hook printed the message (sidecar-exec: see
    /// `crate::sidecar::tty::raw_mode`).
    pub abort: bool,
}

/// Saves stdin's modes (nothing when stdin is no terminal: then none) and installs the panic hook that puts them back.
pub fn save(on_panic: OnPanic) -> Option<&'static Termios> {
    let now = tcgetattr(std::io::stdin()).ok()?;
    let saved = SAVED.get_or_init(|| now);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let was_taken = restore();
        if let (true, Some(reset)) = (was_taken, on_panic.screen_reset) {
            write_to_a_terminal_stdout(reset);
        }
        previous(info);
        if was_taken && on_panic.abort {
            std::process::abort();
        }
    }));
    Some(saved)
}

/// The saved modes, once [`save`] found a terminal.
pub fn saved() -> Option<&'static Termios> {
    SAVED.get()
}

/// Sets stdin's terminal to `modes` (`when`: at once, or after the output drained) and counts it taken.
pub fn take(modes: &Termios, when: OptionalActions) -> std::io::Result<()> {
    tcsetattr(std::io::stdin(), when, modes)?;
    TAKEN.store(true, Ordering::SeqCst);
    Ok(())
}

/// Counts the terminal taken by someone else (ssh): a restore puts the saved modes back.
pub fn taken_elsewhere() {
    TAKEN.store(SAVED.get().is_some(), Ordering::SeqCst);
}

/// Whether the terminal is taken now.
pub fn is_taken() -> bool {
    TAKEN.load(Ordering::SeqCst)
}

/// Puts the saved modes back at once; idempotent: whether the terminal was taken.
pub fn restore() -> bool {
    match (SAVED.get(), TAKEN.swap(false, Ordering::SeqCst)) {
        (Some(saved), true) => {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
            true
        }
        _ => false,
    }
}

/// `text` on stdout, if it is a terminal, written on the descriptor itself: a panic may come while a thread holds
/// stdout's lock.
fn write_to_a_terminal_stdout(text: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        let _ = nix::unistd::write(std::io::stdout(), text.as_bytes());
    }
}

/// ssh-exec's guard: the terminal's modes as they were before `ssh -tt` put it in raw mode, restored when this is
/// dropped and from the panic hook. ssh restores them itself when it ends in order; this covers the ends where it
/// cannot (killed here after a second deadline, killed by someone else, a panic of ours). Only SIGKILL of ssh-exec
/// itself leaves the terminal raw (`stty sane` or `reset` then).
pub struct Restore(());

impl Restore {
    /// Saves stdin's modes (nothing when stdin is no terminal) for ssh to take.
    pub fn save() -> Self {
        if save(OnPanic { screen_reset: None, abort: false }).is_some() {
            taken_elsewhere();
        }
        Restore(())
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}
