//! Reading JSON files that another process may still be writing: the agent-runner writes its results in place, so
//! a reader can see an empty or half-written file and must read it again when it changes.
//!
//! Whoever writes the folders may also leave what is no file to read at all (a FIFO, a symlink to `/dev/zero`, a
//! 10 GiB sparse file): files are read by [`agent_files::read_regular_file`] (regular files only, never through a
//! symlink, at most [`LIMIT`] bytes, never blocking), and anything else is [`Reading::Invalid`] at once.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use agent_files::ReadError;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// How long a file that does not parse may stay unchanged before it is judged broken rather than still being
/// written. A writer that writes a whole file in one call finishes in microseconds; two seconds also covers a slow
/// network filesystem.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The most of any file in the folders that is read: 8 MiB. The largest files are prompts, text for a model; the
/// largest context windows (about two million tokens) hold about 8 MB of text, so no prompt a model could take is
/// refused, and a hostile file costs at most this much memory.
pub const LIMIT: u64 = 8 * 1024 * 1024;

/// One reading of a file that may still be written: what is in it now.
#[derive(Debug)]
pub enum Reading<T> {
    Missing,
    /// Not (yet) JSON: empty, cut short, or garbage. `stamp` tells whether it changes later.
    Incomplete {
        error: String,
        stamp: Stamp,
    },
    /// Complete JSON of the wrong shape (no later write can be pending: a prefix of JSON is never JSON), or no file
    /// to read (not a regular file, too large).
    Invalid(String),
    Ready(T),
}

/// What identifies one version of a file: a rename gives a new inode, a write a new size or mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    /// The stamp of the entry at `path` (of a symlink itself, not of what it points to: links are never read).
    pub fn of(path: &Path) -> Option<Stamp> {
        std::fs::symlink_metadata(path).ok().map(|meta| Stamp::from_metadata(&meta))
    }

    fn from_metadata(meta: &Metadata) -> Stamp {
        Stamp { inode: meta.ino(), len: meta.len(), modified: meta.modified().ok() }
    }
}

pub fn read<T: DeserializeOwned>(path: &Path) -> Reading<T> {
    let (bytes, stamp) = match agent_files::read_regular_file(path, LIMIT) {
        Ok(contents) => (contents.bytes, Stamp::from_metadata(&contents.metadata)),
        Err(err) if err.is_not_found() => return Reading::Missing,
        // Perhaps passing (a permission not set yet): read again while it settles.
        Err(ReadError::Io(err)) => match Stamp::of(path) {
            Some(stamp) => return Reading::Incomplete { error: format!("cannot read it: {err}"), stamp },
            None => return Reading::Missing,
        },
        Err(refused) => return Reading::Invalid(format!("it {refused}")),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Reading::Incomplete { error: "it is empty".to_owned(), stamp };
    }
    // Syntax first, shape second: only a syntax error can mean "not finished yet".
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(err) => {
            return Reading::Incomplete { error: format!("it is not valid JSON ({err}): {}", excerpt(&bytes)), stamp }
        }
    };
    match serde_json::from_value(value) {
        Ok(value) => Reading::Ready(value),
        Err(err) => Reading::Invalid(format!("{err}: {}", excerpt(&bytes))),
    }
}

/// Tracks one file that does not parse, to tell "still being written" from "broken".
#[derive(Debug, Default)]
pub struct Settle {
    last: Option<(Stamp, Instant)>,
}

impl Settle {
    /// Whether the file has kept this same `stamp` for [`SETTLE`].
    pub fn stalled(&mut self, stamp: Stamp) -> bool {
        match self.last {
            Some((seen, since)) if seen == stamp => since.elapsed() >= SETTLE,
            _ => {
                self.last = Some((stamp, Instant::now()));
                false
            }
        }
    }
}

/// The first 200 characters of a file, for error messages.
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

    #[test]
    fn empty_and_cut_files_are_incomplete_and_wrong_shapes_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        assert!(matches!(read::<Shape>(&path), Reading::Missing));
        for partial in ["", "  ", "{\"status\": \"succ", "{\"status\": tr", "{\"status\": 12"] {
            std::fs::write(&path, partial).unwrap();
            assert!(matches!(read::<Shape>(&path), Reading::Incomplete { .. }), "{partial:?}");
        }
        std::fs::write(&path, "{\"other\": 1}").unwrap();
        assert!(matches!(read::<Shape>(&path), Reading::Invalid(_)));
        std::fs::write(&path, "{\"status\": \"ok\"}").unwrap();
        assert!(matches!(read::<Shape>(&path), Reading::Ready(_)));
    }

    #[test]
    fn what_is_no_file_to_read_is_invalid_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let sparse = dir.path().join("sparse.json");
        std::fs::File::create(&sparse).unwrap().set_len(LIMIT + 1).unwrap();
        for path in [link, sparse, dir.path().to_path_buf()] {
            assert!(matches!(read::<Shape>(&path), Reading::Invalid(_)), "{}", path.display());
        }
    }
}
