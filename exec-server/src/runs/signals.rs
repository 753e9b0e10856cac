//! The signals `POST /runs/{id}/signal` sends: a fixed list of names a client may use, so that no request can send
//! SIGSEGV or a number this server does not know the meaning of. The list is what a terminal and a shell deliver to a
//! foreground job (the default path's rule: a forwarded command gets the signals its client got, as sent): the stop
//! signals, the job-control ones (TSTP, STOP, CONT) and WINCH, besides KILL and the two user signals.

use nix::sys::signal::Signal;

/// The names, as the error message lists them.
pub const ALLOWED: &str =
    "TERM, INT, HUP, QUIT, KILL, USR1, USR2, TSTP, STOP, CONT, WINCH (with or without the SIG prefix)";

/// The signal `name` stands for (`TERM` or `SIGTERM`, any case), or `None`.
pub fn parse(name: &str) -> Option<Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match bare {
        "TERM" => Signal::SIGTERM,
        "INT" => Signal::SIGINT,
        "HUP" => Signal::SIGHUP,
        "QUIT" => Signal::SIGQUIT,
        "KILL" => Signal::SIGKILL,
        "USR1" => Signal::SIGUSR1,
        "USR2" => Signal::SIGUSR2,
        "TSTP" => Signal::SIGTSTP,
        "STOP" => Signal::SIGSTOP,
        "CONT" => Signal::SIGCONT,
        "WINCH" => Signal::SIGWINCH,
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
        assert_eq!(parse("sigquit"), Some(Signal::SIGQUIT));
        assert_eq!(parse("TSTP"), Some(Signal::SIGTSTP));
        assert_eq!(parse("STOP"), Some(Signal::SIGSTOP));
        assert_eq!(parse("CONT"), Some(Signal::SIGCONT));
        assert_eq!(parse("WINCH"), Some(Signal::SIGWINCH));
        assert_eq!(parse("SEGV"), None);
        assert_eq!(parse("9"), None);
        assert_eq!(parse(""), None);
        for name in ALLOWED.split(" (").next().unwrap().split(", ") {
            assert!(parse(name).is_some(), "{name} is listed but not parsed");
        }
    }
}
