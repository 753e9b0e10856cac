//! Reading JSON files that another process may still be writing: the agent-runner writes its results in place, so
//! a reader can see an empty or half-written file and must read it again when it changes.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// How long a file that does not parse may stay unchanged before it is judged broken rather than still being
/// written. A writer that writes a whole file in one call finishes in microseconds; two seconds also covers a slow
/// network filesystem.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What is in the file now.
#[derive(Debug)]
pub enum Read<T> {
    Missing,
    /// Not (yet) JSON: empty, cut short, or garbage. `stamp` tells whether it changes later.
    Incomplete {
        error: String,
        stamp: Stamp,
    },
    /// Complete JSON of the wrong shape: no later write can be pending (a prefix of JSON is never JSON).
    Invalid(String),
    Ready(T),
}

/// What identifies one version of a file: a rename gives a new inode, a write a new size or mtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    inode: u64,
    len: u64,
    mtime_nanos: i128,
}

impl Stamp {
    pub fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            inode: meta.ino(),
            len: meta.len(),
            mtime_nanos: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }
}

pub fn read<T: DeserializeOwned>(path: &Path) -> Read<T> {
    let Some(stamp) = Stamp::of(path) else { return Read::Missing };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Read::Missing,
        Err(err) => return Read::Incomplete { error: format!("cannot read it: {err}"), stamp },
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Read::Incomplete { error: "it is empty".to_owned(), stamp };
    }
    // Syntax first, shape second: only a syntax error can mean "not finished yet".
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(err) => {
            return Read::Incomplete { error: format!("it is not valid JSON ({err}): {}", excerpt(&bytes)), stamp }
        }
    };
    match serde_json::from_value(value) {
        Ok(value) => Read::Ready(value),
        Err(err) => Read::Invalid(format!("{err}: {}", excerpt(&bytes))),
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
        assert!(matches!(read::<Shape>(&path), Read::Missing));
        for partial in ["", "  ", "{\"status\": \"succ", "{\"status\": tr", "{\"status\": 12"] {
            std::fs::write(&path, partial).unwrap();
            assert!(matches!(read::<Shape>(&path), Read::Incomplete { .. }), "{partial:?}");
        }
        std::fs::write(&path, "{\"other\": 1}").unwrap();
        assert!(matches!(read::<Shape>(&path), Read::Invalid(_)));
        std::fs::write(&path, "{\"status\": \"ok\"}").unwrap();
        assert!(matches!(read::<Shape>(&path), Read::Ready(_)));
    }
}
