//! The signals `POST /runs/{id}/signal` sends: a short, fixed list of names a client may use, so that no request can
//! send SIGSTOP, SIGSEGV or a number this server does not know the meaning of.

use nix::sys::signal::Signal;

/// The names, as the error message lists them.
pub const ALLOWED: &str = "TERM, INT, HUP, KILL, USR1, USR2 (with or without the SIG prefix)";

/// The signal `name` stands for (`TERM` or `SIGTERM`, any case), or `None`.
pub fn parse(name: &str) -> Option<Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match bare {
        "TERM" => Signal::SIGTERM,
        "INT" => Signal::SIGINT,
        "HUP" => Signal::SIGHUP,
        "KILL" => Signal::SIGKILL,
        "USR1" => Signal::SIGUSR1,
        "USR2" => Signal::SIGUSR2,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_and_without_prefix() {
        assert_eq!(parse("TERM"), Some(Signal::SIGTERM));
        assert_eq!(parse("SIGKILL"), Some(Signal::SIGKILL));
        assert_eq!(parse("usr1"), Some(Signal::SIGUSR1));
        assert_eq!(parse("STOP"), None);
        assert_eq!(parse("9"), None);
        assert_eq!(parse(""), None);
    }
}
