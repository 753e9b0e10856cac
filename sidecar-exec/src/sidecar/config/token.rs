//! The bearer token: the one place it is read, from any of its four sources, trimmed as the server trims its own,
//! and refused with the source's name when it cannot travel in an `Authorization` header.

use std::path::Path;

use std::fmt;

use protocol::token::TokenFileError;
use protocol::vars::{SIDECAR_TOKEN, SIDECAR_TOKEN_FILE};

use crate::sidecar::config::entry::SidecarEntry;

/// A bearer token ready to send, and where it came from (for messages: "the token from SIDECAR_TOKEN was refused").
#[derive(Debug, Clone)]
pub struct BearerToken {
    pub value: String,
    pub source: String,
}

/// The token for one sidecar. The first source that is set wins: the entry's `token`, the entry's `token_file`,
/// SIDECAR_TOKEN, SIDECAR_TOKEN_FILE (a per-runtime token beats the global one; within each, a value beats a
/// file). A value that is empty once trimmed counts as unset; an empty file is a mistake (a secret that was not
/// mounted), so it is an error.
pub fn resolve(entry: &SidecarEntry, runtime: &str) -> Result<Option<BearerToken>, BearerTokenError> {
    if let Some(token) = entry.token.as_deref() {
        if let Some(token) = checked(token, format!("the token of BUILD_SIDECARS entry '{runtime}'"))? {
            return Ok(Some(token));
        }
    }
    if let Some(file) = &entry.token_file {
        return from_file(file, &format!("token_file of BUILD_SIDECARS entry '{runtime}'")).map(Some);
    }
    if let Ok(token) = std::env::var(SIDECAR_TOKEN) {
        if let Some(token) = checked(&token, SIDECAR_TOKEN.to_owned())? {
            return Ok(Some(token));
        }
    }
    match std::env::var_os(SIDECAR_TOKEN_FILE).filter(|file| !file.is_empty()) {
        Some(file) => from_file(Path::new(&file), SIDECAR_TOKEN_FILE).map(Some),
        None => Ok(None),
    }
}

/// A token file, read as exec-server reads its own ([`protocol::token::read_file`]).
fn from_file(file: &Path, via: &str) -> Result<BearerToken, BearerTokenError> {
    let source = format!("the token file {} ({via})", file.display());
    match protocol::token::read_file(file) {
        Ok(value) => sendable(&value, source),
        Err(problem) => Err(BearerTokenError::File { source, problem }),
    }
}

/// Trims `text` the way exec-server trims its token ([`protocol::token::normalize`]: a file written by `echo` ends
/// in a newline, and a variable set from one often does too); `None` when nothing is left.
fn checked(text: &str, source: String) -> Result<Option<BearerToken>, BearerTokenError> {
    protocol::token::normalize(text).map(|value| sendable(value, source)).transpose()
}

/// Refuses anything but printable ASCII, space and tab: the bytes an HTTP header can carry and the server can read
/// back as text. A control byte or a non-ASCII character left inside is a mistake no server can match, so it is
/// named here instead of surfacing as reqwest's "builder error".
fn sendable(value: &str, source: String) -> Result<BearerToken, BearerTokenError> {
    if let Some((at, bad)) = value.char_indices().find(|(_, c)| !matches!(c, ' '..='~' | '\t')) {
        return Err(BearerTokenError::Unsendable { source, at, bad });
    }
    Ok(BearerToken { value: value.to_owned(), source })
}

/// Why a configured token cannot be used; each names its source (a variable, a file, a BUILD_SIDECARS entry).
#[derive(Debug)]
pub enum BearerTokenError {
    /// A token file that gives no token: missing, not a regular file, too large, not text or empty (a secret that
    /// was not mounted).
    File { source: String, problem: TokenFileError },
    /// It holds `bad` at byte `at`, which an HTTP header cannot carry.
    Unsendable { source: String, at: usize, bad: char },
}

impl fmt::Display for BearerTokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BearerTokenError::File { source, problem } => write!(f, "{source} {problem}"),
            BearerTokenError::Unsendable { source, at, bad } => write!(
                f,
                "{source} holds {bad:?} at byte {at}, which cannot be sent in an HTTP header: a token is printable \
                 ASCII (was a newline or an escape sequence copied into it?)"
            ),
        }
    }
}

impl std::error::Error for BearerTokenError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_and_refusal() {
        let token = |text: &str| checked(text, "T".into()).map(|t| t.map(|t| t.value)).map_err(|e| e.to_string());
        assert_eq!(token(" tok\r\n"), Ok(Some("tok".to_owned())));
        assert_eq!(token("a b\tc"), Ok(Some("a b\tc".to_owned())));
        assert_eq!(token("\n"), Ok(None));
        assert!(matches!(checked("to\nk", "T".into()), Err(BearerTokenError::Unsendable { at: 2, bad: '\n', .. })));
        let refused = token("to\nk").unwrap_err();
        assert!(refused.starts_with("T holds '\\n' at byte 2"), "{refused}");
        assert!(token("tök").is_err() && token("to\x1bk").is_err() && token("to\x7fk").is_err());
    }
}
