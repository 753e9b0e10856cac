//! The bearer token as both ends read it: exec-server (from `EXEC_SERVER_TOKEN` or `--token-file`) and sidecar-exec
//! (from its four sources). Both trim a token the same way and read a token file the same way, so a secret that one
//! side accepts the other matches; where each side looks for it, and what it says when it finds none, stays its own.

use std::path::Path;

/// A token as written, without the whitespace around it: a secret written with `echo` ends in a newline, and no
/// token can hold whitespace at its ends (a header value cannot). `None` when nothing is left.
pub fn normalize(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|token| !token.is_empty())
}

/// The most a token file may hold: a token is one short line, and a Kubernetes Secret's value is at most 1 MiB, so
/// 64 KiB is far above any real token and small enough that a wrong path (`/dev/zero` is refused as a device; a
/// 1 GB log) fails at once.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Why a token file gives no token. Displayed as what follows the file's name ("token file X {problem}").
#[derive(Debug)]
pub enum TokenFileError {
    /// It could not be looked up, opened or read (missing, no permission, …).
    Unreadable(std::io::Error),
    /// What the path names, after its links, is not a regular file (a FIFO, a device, a folder): never opened in a
    /// way that could block, never read.
    NotAFile(agent_files::FileKind),
    /// It holds more than [`MAX_TOKEN_FILE_BYTES`].
    TooLarge,
    /// It is not UTF-8 text.
    NotText,
    /// Nothing is left once trimmed: a secret that was not mounted, most likely. An error, never "no token": an
    /// empty file must not leave a server open or a client sending nothing.
    Empty,
}

impl std::fmt::Display for TokenFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenFileError::Unreadable(err) => write!(f, "cannot be read: {err}"),
            TokenFileError::NotAFile(kind) => write!(
                f,
                "is {kind}, not a regular file: name the file that holds the token (links to one are followed)"
            ),
            TokenFileError::TooLarge => write!(
                f,
                "is larger than {MAX_TOKEN_FILE_BYTES} bytes, far more than a token: name the file that holds the token"
            ),
            TokenFileError::NotText => f.write_str("is not UTF-8 text: a token is printable ASCII"),
            TokenFileError::Empty => f.write_str("is empty: put the token in it"),
        }
    }
}

/// The token in a file, normalized. The path is followed through links (a Kubernetes Secret's files are links into
/// its `..data/` folder) to a regular file of at most [`MAX_TOKEN_FILE_BYTES`], read without ever blocking
/// ([`agent_files::read_regular_file_through_links`]).
pub fn read_file(path: &Path) -> Result<String, TokenFileError> {
    use agent_files::{ReadError, Refusal};
    let bytes = match agent_files::read_regular_file_through_links(path, MAX_TOKEN_FILE_BYTES) {
        Ok(contents) => contents.bytes,
        Err(ReadError::Io(err)) => return Err(TokenFileError::Unreadable(err)),
        Err(ReadError::Refused(Refusal::NotRegular { kind })) => return Err(TokenFileError::NotAFile(kind)),
        Err(ReadError::Refused(Refusal::TooLarge { .. })) => return Err(TokenFileError::TooLarge),
    };
    let text = String::from_utf8(bytes).map_err(|_| TokenFileError::NotText)?;
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
        assert!(matches!(read_file(Path::new("/dev/zero")), Err(TokenFileError::NotAFile(_))));
        assert!(matches!(read_file(&dir), Err(TokenFileError::NotAFile(_))));
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_file(&file), Err(TokenFileError::NotText)));
        std::fs::File::create(&file).unwrap().set_len(MAX_TOKEN_FILE_BYTES + 1).unwrap();
        assert!(matches!(read_file(&file), Err(TokenFileError::TooLarge)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
