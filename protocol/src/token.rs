//! The bearer token as both ends read it: exec-server (from `EXEC_SERVER_TOKEN` or `--token-file`) and sidecar-exec
//! (from its four sources). Both trim a token the same way and read a token file the same way, so a secret that one
//! side accepts the other matches; where each side looks for it, and what it says when it finds none, stays its own.

use std::path::Path;

/// A token as written, without the whitespace around it: a secret written with `echo` ends in a newline, and no
/// token can hold whitespace at its ends (a header value cannot). `None` when nothing is left.
pub fn normalize(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|token| !token.is_empty())
}

/// Why a token file gives no token.
#[derive(Debug)]
pub enum TokenFileError {
    Unreadable(std::io::Error),
    /// Nothing is left once trimmed: a secret that was not mounted, most likely. An error, never "no token": an
    /// empty file must not leave a server open or a client sending nothing.
    Empty,
}

/// The token in a file, normalized.
pub fn read_file(path: &Path) -> Result<String, TokenFileError> {
    let text = std::fs::read_to_string(path).map_err(TokenFileError::Unreadable)?;
    normalize(&text).map(str::to_owned).ok_or(TokenFileError::Empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_and_files_are_trimmed_alike() {
        assert_eq!(normalize("tok\n"), Some("tok"));
        assert_eq!(normalize("  tok \r\n"), Some("tok"));
        assert_eq!(normalize("a b"), Some("a b"));
        assert_eq!(normalize(" \n"), None);
        let dir = std::env::temp_dir().join(format!("protocol-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "tok\n").unwrap();
        assert_eq!(read_file(&file).unwrap(), "tok");
        std::fs::write(&file, "\n").unwrap();
        assert!(matches!(read_file(&file), Err(TokenFileError::Empty)));
        assert!(matches!(read_file(&dir.join("missing")), Err(TokenFileError::Unreadable(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
