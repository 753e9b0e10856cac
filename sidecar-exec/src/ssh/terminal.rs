//! The local terminal of a call that runs on one on the host (`ssh -tt`, [`crate::at_a_terminal`]): its settings put
//! back on every way out, whatever happens to ssh.

use std::os::fd::AsFd;

use nix::sys::termios::{tcgetattr, tcsetattr, SetArg, Termios};

/// The terminal's settings as they were before ssh put it in raw mode, restored when this is dropped and from the
/// panic hook. ssh restores them itself when it ends in order; this covers the ends where it cannot (killed here
/// after a second deadline, killed by someone else, a panic of ours). Only SIGKILL of ssh-exec itself leaves the
/// terminal raw (`stty sane` or `reset` then).
pub struct Restore(Option<Termios>);

impl Restore {
    /// Saves stdin's terminal settings (nothing when stdin is no terminal) and installs the panic hook that puts them
    /// back.
    pub fn save() -> Self {
        let saved = tcgetattr(std::io::stdin().as_fd()).ok();
        if let Some(saved) = saved.clone() {
            // A Mutex only for Sync (nix's Termios holds a RefCell); a panic is the one user.
            let saved = std::sync::Mutex::new(saved);
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if let Ok(saved) = saved.lock() {
                    restore(&saved);
                }
                previous(info);
            }));
        }
        Restore(saved)
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            restore(saved);
        }
    }
}

/// `TCSADRAIN`: what ssh wrote before it went is shown in the mode it was written for.
fn restore(saved: &Termios) {
    let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, saved);
}
