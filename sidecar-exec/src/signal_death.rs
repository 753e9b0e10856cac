//! Dying of the signal the command died of, for both clients: natively the caller's `waitpid` sees the
//! command killed by signal N, not exit 128+N, and shells act on the difference (bash ends a loop whose command died of SIGINT, and
//! goes on after one that exited 130). The client cannot simply raise the signal: it handles INT, TERM, HUP and
//! QUIT itself, and resetting a disposition has no safe API. `execve` resets every caught signal to its default
//! (POSIX), so the client replaces itself with `/bin/sh -c 'kill -N $$; exit 128+N'`: the same process, killed by
//! N; the `exit` is for a signal this process inherited as ignored, which stays ignored across exec.
//!
//! Each client says what the command died of: sidecar-exec as exec-server reports it (`signal`), ssh-exec when it
//! delivered signal N itself and the command ended 128+N (the host's shell reports a death by N and an exit with
//! 128+N alike, so that is what ssh-exec can know; a program that exits 128+N after handling N follows the same
//! convention, "wait and cooperative exit", that this client does).

use std::io::Write;
use std::os::unix::process::CommandExt;

/// The signals whose default action ends a process without a core dump. Core-dumping ones (QUIT, ILL, ABRT, FPE,
/// SEGV, BUS, SYS, TRAP, XCPU, XFSZ) stay exit 128+N: the client would leave a core file of its own here.
fn terminates_cleanly(signal: i32) -> bool {
    matches!(signal, 1 | 2 | 9 | 10 | 12 | 13 | 14 | 15 | 26 | 27 | 29 | 30 | 34..=64)
}

/// Ends this process by `signal` when the command died of it (`code` is then 128 + `signal`); returns (and the
/// caller exits with `code`) when that does not apply or cannot be done.
pub fn die_like(code: i32, died_of: Option<i32>) {
    let Some(signal) = died_of.filter(|&signal| code == 128 + signal && terminates_cleanly(signal)) else { return };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let _ = std::process::Command::new("/bin/sh").arg("-c").arg(format!("kill -{signal} $$; exit {code}")).exec();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signals_that_end_a_process_without_a_core() {
        assert!([1, 2, 9, 15, 13, 34, 64].into_iter().all(terminates_cleanly));
        assert!(![3, 4, 6, 8, 11, 17, 18, 19, 20, 0, 65].into_iter().any(terminates_cleanly));
    }
}
