//! What a backend said at install time about which commands it has (a build sidecar's `GET /info`, the SSH host's
//! `ssh-exec --probe`), and the one policy for a backend that gave no list: all the commands it could take are
//! wrapped, with one line that says so.

use std::fmt;

/// What one backend said about its commands; `Why` is its kind of reason for giving no list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<Why> {
    /// The commands it has, of those it was asked about.
    Has(Vec<String>),
    /// It gave no list it can be held to: why.
    Unknown(Why),
}

impl<Why> Answer<Why> {
    /// Whether it said it lacks `command`.
    ///
    /// *Decision*, the same for both backends: one that gave no list (not up yet, unreachable, a server that only
    /// speaks the contract) lacks nothing, so every command it could take is wrapped, as before backends were
    /// asked. The agent still starts within the installer's bound; a command the backend does lack then fails
    /// when called, with the 127 and the "command not found" a missing command gives; and the next install (the
    /// entrypoint runs it at every start) asks again. Wrapping nothing instead would leave an agent whose backend
    /// was slow for a moment without its toolchain, unannounced, until its next start.
    pub fn lacks(&self, command: &str) -> bool {
        matches!(self, Answer::Has(commands) if !commands.iter().any(|has| has == command))
    }
}

/// Why a backend gave no list, as its line says it: what went wrong (`Display`) and what to do about it.
pub trait WhyNoList: fmt::Display {
    /// What the user does next: wait for the backend, fix the configuration, or upgrade the server.
    fn what_to_do(&self) -> &'static str;
}

/// The one line for a backend whose commands are not known (see [`Answer::lacks`]): `backend` names it ("the go
/// sidecar", "the SSH host build-mac"), `why` says what went wrong and what to do, `commands` are what it got
/// wrappers for.
pub fn unlisted_line(program: &str, backend: &str, why: &dyn WhyNoList, commands: &[&str]) -> String {
    format!(
        "{program}: {backend} {why}: wrapping all its commands [{}]; one it lacks fails when called (127); {}",
        commands.join(" "),
        why.what_to_do()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_list_can_lack_a_command() {
        let listed: Answer<()> = Answer::Has(vec!["npm".into()]);
        assert!(!listed.lacks("npm") && listed.lacks("yarn"));
        assert!(!Answer::Unknown(()).lacks("yarn"));
    }
}
