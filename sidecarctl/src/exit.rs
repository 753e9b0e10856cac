//! The exit codes of sidecarctl's own outcomes, shared by every command (`up`, `ps`, `logs`, `down`, `image`,
//! `compose`, `kube`): one code per cause, whichever command met it (docs/sidecarctl.md, "Exit codes"). An agent's
//! own code passes through `up` unchanged.

/// Exit code when the run (or the builder) a command names does not exist: `down RUN`, `logs RUN [RT]`.
pub const EXIT_NO_SUCH_RUN: i32 = 1;

/// Exit code when the command line itself is wrong (clap's own code: an unknown flag, a missing argument).
pub const EXIT_USAGE: i32 = 2;

/// Exit code when sidecarctl itself fails or refuses (as `docker run`: 125): no engine, an engine error, an invalid
/// profile or flag, a run name that is another run's, a run that is not the caller's, a failed health gate, a failed
/// image build, a file that does not read back.
pub const EXIT_FAILED: i32 = 125;

/// Why a command ended without doing what it was asked, as far as the exit code goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The run, or the run's builder, that the command names is not on the engine.
    NoSuchRun,
    /// sidecarctl failed or refused (see [`EXIT_FAILED`]).
    Failed,
    /// A stop signal (Ctrl-C, SIGTERM, SIGHUP), number N: 128 + N, as a shell reports it.
    Signal(i32),
}

impl Cause {
    pub fn code(self) -> i32 {
        match self {
            Cause::NoSuchRun => EXIT_NO_SUCH_RUN,
            Cause::Failed => EXIT_FAILED,
            Cause::Signal(signal) => 128 + signal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_code_per_cause() {
        assert_eq!(Cause::NoSuchRun.code(), 1);
        assert_eq!(Cause::Failed.code(), 125);
        assert_eq!(Cause::Signal(2).code(), 130);
        assert_eq!(Cause::Signal(15).code(), 143);
        // Distinct from each other and from clap's usage code.
        let codes = [Cause::NoSuchRun.code(), EXIT_USAGE, Cause::Failed.code(), Cause::Signal(1).code()];
        for (i, a) in codes.iter().enumerate() {
            assert!(codes[i + 1..].iter().all(|b| b != a), "{codes:?}");
        }
    }
}
