//! The exit code sidecar-exec ends with for a command the server reports as finished.

use protocol::StartErrorKind;

use crate::exit::ClientExit;
use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;

/// What the server reported of a command's end.
#[derive(Debug, Clone, Copy)]
pub struct ReportedEnd<'a> {
    pub code: i32,
    pub timed_out: bool,
    pub error: Option<&'a str>,
    /// Why it never started, when the server says.
    pub start_error: Option<StartErrorKind>,
}

/// The shell's exit code and message for a command that never started, when it has them: 127 and
/// `PROGRAM: command not found`, 126 and `PROGRAM: Permission denied`.
pub fn as_shell(kind: Option<StartErrorKind>, program: &str) -> Option<(i32, String)> {
    match kind? {
        StartErrorKind::NotFound => Some((127, format!("{program}: command not found"))),
        StartErrorKind::PermissionDenied => Some((126, format!("{program}: Permission denied"))),
        StartErrorKind::Cwd | StartErrorKind::Other => None,
    }
}

/// How the client ends for a finished command's reported code, with the notes already gathered (none: no message).
/// `settings` (a forwarded call's) adds how to raise the deadline to a timeout; `program` is the command's name.
pub fn finished(
    target: &Endpoint,
    settings: Option<&CallSettings>,
    program: Option<&str>,
    outcome: &ReportedEnd<'_>,
    mut notes: Vec<String>,
) -> ClientExit {
    if outcome.code == protocol::EXIT_NOT_STARTED {
        if let Some((code, line)) = program.and_then(|program| as_shell(outcome.start_error, program)) {
            // The shell's words, without the client's prefix: what a native run prints.
            crate::sidecar::tty::raw_mode::eprint_line(&line);
            return ClientExit::code(code);
        }
    }
    let code = match exit_code_for(outcome.code, outcome.timed_out, outcome.error) {
        Ok(code) => code,
        Err(impossible) => {
            notes.push(impossible.message(&target.url));
            ImpossibleCode::EXIT
        }
    };
    if let (protocol::EXIT_TIMED_OUT, true, Some(settings)) = (code, outcome.timed_out, settings) {
        notes.push(deadline_hint(settings));
    }
    ClientExit { code, message: (!notes.is_empty()).then(|| notes.join("; ")) }
}

/// What exit 124 adds: which deadline there is and how to raise it (a native command has none).
fn deadline_hint(settings: &CallSettings) -> String {
    let mut hint = format!(
        "a forwarded command may run for SIDECAR_TIMEOUT seconds ({} now; the sidecar's --max-timeout caps it): \
         set SIDECAR_TIMEOUT=SECONDS to give it longer",
        settings.timeout_secs
    );
    if let Some(idle) = settings.idle_timeout_secs {
        hint.push_str(&format!(", or raise SIDECAR_IDLE_TIMEOUT ({idle} s without output) or unset it"));
    }
    hint
}

/// A code a server reported that no process can exit with: anything outside 0..=255 but the contract's -1.
///
/// *Decision:* the client exits [`ImpossibleCode::EXIT`] (1) with one `sidecar-exec:` line naming the code. Passing
/// it on is wrong: `exit` keeps only the low 8 bits, so 256 would become 0 — a failure reported as success — and -2
/// would become 254. 255 means "never started", and this command may have run; 1 is already the client's code for
/// what it cannot vouch for (configuration and transport errors, always with a line saying why). The output the
/// server sent is still written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImpossibleCode(pub i32);

impl ImpossibleCode {
    pub const EXIT: i32 = 1;

    pub fn message(self, url: &str) -> String {
        format!(
            "sidecar at {url} reported exit code {}, which no process can exit with (0 to 255): exiting {} since \
             the command's outcome is unknown",
            self.0,
            Self::EXIT
        )
    }
}

/// The exit code for a finished command: its own; 124 for a timeout (ours: `timed_out`; the contract's: -1 with
/// "timed out"); 255 when it never started (-1); an [`ImpossibleCode`] for any other code outside 0..=255.
pub fn exit_code_for(code: i32, timed_out: bool, error: Option<&str>) -> Result<i32, ImpossibleCode> {
    if timed_out || (code == protocol::EXIT_NOT_STARTED && error.is_some_and(|e| e.contains("timed out"))) {
        Ok(protocol::EXIT_TIMED_OUT)
    } else if code == protocol::EXIT_NOT_STARTED {
        Ok(255)
    } else if (0..=255).contains(&code) {
        Ok(code)
    } else {
        Err(ImpossibleCode(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_mapping() {
        assert_eq!(exit_code_for(0, false, None), Ok(0));
        assert_eq!(exit_code_for(137, false, None), Ok(137));
        assert_eq!(exit_code_for(255, false, None), Ok(255));
        assert_eq!(exit_code_for(124, true, Some("command timed out after 1s")), Ok(124));
        assert_eq!(exit_code_for(-1, false, Some("command timed out after 1s")), Ok(124));
        assert_eq!(exit_code_for(-1, false, Some("failed to start command: x")), Ok(255));
        assert_eq!(exit_code_for(-1, false, None), Ok(255));
        assert_eq!(exit_code_for(256, false, None), Err(ImpossibleCode(256)));
        assert_eq!(exit_code_for(-2, false, None), Err(ImpossibleCode(-2)));
    }
}
