//! Reading a JSON document that its writer may not have finished: what it holds now, or why it cannot be used, and
//! whether a later write can still change that.
//!
//! The peers write in place, not atomically (the agent-runner's results and its tool requests), so a reader can see
//! an empty or half-written file. The rules, and why:
//! - **Empty (or only whitespace), not JSON, or unreadable: perhaps unfinished** ([`Reading::Incomplete`]). A file
//!   being written in place is empty, then a prefix of its JSON; a permission not set yet or no descriptor free may
//!   pass. Read it again when it changes, and judge it broken only once its writer has stopped
//!   ([`crate::unfinished`]).
//! - **JSON of the wrong shape: final** ([`Reading::Unusable`]). A prefix of a JSON object or array is never JSON, so
//!   a document that parses is complete: no later write is pending, and waiting could not change the answer.
//! - **Not a file to read: final** ([`Reading::Unusable`]): the rules of [`crate::read_regular_file`].

use std::fmt;
use std::io;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::read::{read_regular_file, ReadError, Refusal};
use crate::version::FileVersion;

/// One reading of a document: what is in it now.
#[derive(Debug)]
pub enum Reading<T> {
    /// Nothing stands under the name (any more).
    Missing,
    /// Not usable yet, perhaps because it is still being written: `version` tells whether it changes later.
    Incomplete {
        why: Incomplete,
        version: FileVersion,
    },
    /// Not usable, and no later write can be pending.
    Unusable(Unusable),
    Ready {
        value: T,
        version: FileVersion,
    },
}

/// Why a document is not usable yet. Displayed as what follows the file's name ("the result {it is empty}").
#[derive(Debug)]
pub enum Incomplete {
    /// Empty, or only whitespace.
    Empty,
    /// Not JSON (yet): cut short, or garbage.
    NotJson { error: serde_json::Error, excerpt: String },
    /// There, but it could not be opened or read (no permission, no descriptor free).
    Unreadable(io::Error),
}

/// Why a document cannot be used, for good. Displayed as what follows the file's name.
#[derive(Debug)]
pub enum Unusable {
    /// Not a regular file of at most the limit.
    Refused(Refusal),
    /// Complete JSON, not of the shape the protocol gives this file.
    WrongShape { error: serde_json::Error, excerpt: String },
}

/// Why a document was not used in the end: it stayed incomplete until the reader gave up, or it is unusable.
#[derive(Debug)]
pub enum DocumentError {
    Incomplete(Incomplete),
    Unusable(Unusable),
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incomplete::Empty => f.write_str("is empty"),
            Incomplete::NotJson { error, excerpt } => write!(f, "is not valid JSON ({error}): {excerpt}"),
            Incomplete::Unreadable(err) => write!(f, "cannot be read: {err}"),
        }
    }
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Refused(refusal) => refusal.fmt(f),
            Unusable::WrongShape { error, excerpt } => {
                write!(f, "is valid JSON but not of the expected form ({error}): {excerpt}")
            }
        }
    }
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentError::Incomplete(why) => why.fmt(f),
            DocumentError::Unusable(why) => why.fmt(f),
        }
    }
}

impl std::error::Error for Incomplete {}
impl std::error::Error for Unusable {}
impl std::error::Error for DocumentError {}

impl From<Incomplete> for DocumentError {
    fn from(why: Incomplete) -> Self {
        DocumentError::Incomplete(why)
    }
}

impl From<Unusable> for DocumentError {
    fn from(why: Unusable) -> Self {
        DocumentError::Unusable(why)
    }
}

/// Reads the JSON document `path` as a `T`, by the rules above; at most `limit` bytes of it.
pub fn read_document<T: DeserializeOwned>(path: &Path, limit: u64) -> Reading<T> {
    let (bytes, version) = match read_regular_file(path, limit) {
        Ok(contents) => (contents.bytes, FileVersion::from_metadata(&contents.metadata)),
        Err(err) if err.is_not_found() => return Reading::Missing,
        Err(ReadError::Io(err)) => match FileVersion::of(path) {
            Some(version) => return Reading::Incomplete { why: Incomplete::Unreadable(err), version },
            None => return Reading::Missing,
        },
        Err(ReadError::Refused(refusal)) => return Reading::Unusable(Unusable::Refused(refusal)),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Reading::Incomplete { why: Incomplete::Empty, version };
    }
    // Syntax first, shape second: only a syntax error can mean "not finished yet".
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(error) => {
            return Reading::Incomplete { why: Incomplete::NotJson { error, excerpt: excerpt(&bytes) }, version }
        }
    };
    match serde_json::from_value(value) {
        Ok(value) => Reading::Ready { value, version },
        Err(error) => Reading::Unusable(Unusable::WrongShape { error, excerpt: excerpt(&bytes) }),
    }
}

/// The first 200 characters of `bytes`, quoted, for a message that shows what a file or a reply held.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Shape {
        #[allow(dead_code)]
        status: String,
    }

    fn read(path: &Path) -> Reading<Shape> {
        read_document(path, 1024)
    }

    #[test]
    fn empty_and_cut_files_are_incomplete_and_wrong_shapes_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        assert!(matches!(read(&path), Reading::Missing));
        for blank in ["", "  \n"] {
            std::fs::write(&path, blank).unwrap();
            assert!(matches!(read(&path), Reading::Incomplete { why: Incomplete::Empty, .. }), "{blank:?}");
        }
        for partial in ["{\"status\": \"succ", "{\"status\": tr", "{\"status\": 12", "{not json"] {
            std::fs::write(&path, partial).unwrap();
            assert!(matches!(read(&path), Reading::Incomplete { why: Incomplete::NotJson { .. }, .. }), "{partial:?}");
        }
        std::fs::write(&path, "{\"other\": 1}").unwrap();
        let Reading::Unusable(why) = read(&path) else { panic!("a wrong shape is final") };
        assert!(matches!(why, Unusable::WrongShape { .. }));
        assert_eq!(
            why.to_string(),
            "is valid JSON but not of the expected form (missing field `status`): \"{\\\"other\\\": 1}\""
        );
        std::fs::write(&path, "{\"status\": \"ok\"}").unwrap();
        let Reading::Ready { version, .. } = read(&path) else { panic!("complete") };
        assert_eq!(Some(version), FileVersion::of(&path));
    }

    #[test]
    fn what_is_no_file_to_read_is_unusable_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let sparse = dir.path().join("sparse.json");
        std::fs::File::create(&sparse).unwrap().set_len(1025).unwrap();
        let fifo = dir.path().join("fifo.json");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        for path in [link, sparse, fifo, dir.path().to_path_buf()] {
            assert!(matches!(read(&path), Reading::Unusable(Unusable::Refused(_))), "{}", path.display());
        }
    }

    #[test]
    fn excerpts_are_cut_and_quoted() {
        assert_eq!(excerpt(b"a\"b"), "\"a\\\"b\"");
        assert_eq!(excerpt("é".repeat(300).as_bytes()), format!("{:?}", format!("{}…", "é".repeat(200))));
    }
}
