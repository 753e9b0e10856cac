//! What a person watching `up` sees, on stderr only (stdout carries nothing but the agent's own output): one line
//! per step; for the slow waits (pull, health), on a terminal a line rewritten in place, and when stderr is a file
//! or a pipe a step line when the wait starts and then one every [`WAIT_LINE_EVERY`], so that a log says what is
//! being waited for without a line per check.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a slow wait writes where it is when stderr is not a terminal.
pub const WAIT_LINE_EVERY: Duration = Duration::from_secs(10);

pub struct Progress {
    tty: bool,
    /// A status line is on screen and must be cleared before the next step's line.
    pending: AtomicBool,
}

impl Default for Progress {
    fn default() -> Self {
        Progress { tty: std::io::stderr().is_terminal(), pending: AtomicBool::new(false) }
    }
}

impl Progress {
    pub fn step(&self, message: &str) {
        let mut err = std::io::stderr().lock();
        if self.pending.swap(false, Ordering::Relaxed) {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "sidecarctl: {message}");
    }

    /// A slow wait's status: on a terminal, [`Progress::status`]; otherwise a step line at the wait's first status
    /// and then at most one every [`WAIT_LINE_EVERY`] (`said`: when this wait last wrote one).
    pub fn waiting(&self, message: &str, said: &mut Option<Instant>) {
        if self.tty {
            return self.status(message);
        }
        let now = Instant::now();
        if line_due(*said, now) {
            self.step(message);
            *said = Some(now);
        }
    }

    /// A transient status (terminal only): rewritten in place, cleared by the next step.
    pub fn status(&self, message: &str) {
        if self.tty {
            let mut line: String = message.chars().filter(|c| !c.is_control()).collect();
            line.truncate(160);
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K{line}");
            self.pending.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether a wait that last wrote a line at `said` (never: `None`) writes one at `now`.
fn line_due(said: Option<Instant>, now: Instant) -> bool {
    said.is_none_or(|said| now.saturating_duration_since(said) >= WAIT_LINE_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_without_a_terminal_writes_at_its_start_then_every_ten_seconds() {
        let start = Instant::now();
        assert!(line_due(None, start), "the first status of a wait is written");
        assert!(!line_due(Some(start), start + Duration::from_millis(9_900)));
        assert!(line_due(Some(start), start + WAIT_LINE_EVERY));
    }
}
