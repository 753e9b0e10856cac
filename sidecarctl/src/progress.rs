//! What a person watching `up` sees, on stderr only (stdout carries nothing but the agent's own output): one line
//! per step; on a terminal also a line rewritten in place for the slow waits (pull, health), which is dropped when
//! stderr is a file or a pipe so that logs stay one line per step.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

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
