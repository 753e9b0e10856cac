//! The exit code sidecar-exec ends with for a command the server reports as finished.

use crate::exit::ClientExit;
use crate::sidecar::sidecars::Target;

/// How the client ends for a finished command's reported code, with the notes already gathered (none: no message).
pub fn finished(
    target: &Target,
    code: i32,
    timed_out: bool,
    error: Option<&str>,
    mut notes: Vec<String>,
) -> ClientExit {
    let code = match exit_code_for(code, timed_out, error) {
        Ok(code) => code,
        Err(impossible) => {
            notes.push(impossible.message(&target.url));
            ImpossibleCode::EXIT
        }
    };
    ClientExit { code, message: (!notes.is_empty()).then(|| notes.join("; ")) }
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
