//! Telling a file that is still being written from a broken one: the one rule every reader of the IPC folders
//! follows for a document that is not usable yet ([`crate::Reading::Incomplete`]).
//!
//! *Decision:* a file is judged broken once it has not changed for [`QUIET_PERIOD`], counted from the last change
//! the reader saw, not from when the reader first saw the file. A writer that is still writing is not finished,
//! however long it takes in all; only one that has stopped is. (exec-server used to count from first sight, so a
//! request written in pieces over more than 2 s was refused half-written; sidecar-ipc counted from the last change.)
//! A file that keeps changing is waited for as long as it changes: each change costs one read within the size
//! limit, and a caller with a deadline of its own (a prompt's `--timeout`) still stops at it.

use std::borrow::Borrow;
use std::collections::hash_map::{Entry, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::version::FileVersion;

/// How long a document that is not usable yet may stay unchanged before it is judged broken rather than still
/// being written. A writer that writes a whole file in one call finishes in microseconds, one that writes it in
/// pieces within milliseconds; two seconds also cover a slow network file system and a loaded node.
pub const QUIET_PERIOD: Duration = Duration::from_secs(2);

/// What to do with a file that is not usable yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It may still be written: read it again when it changes, and by `until` at the latest (when it is judged).
    Wait { until: Instant },
    /// It has not changed for [`QUIET_PERIOD`]: its writer has stopped, and it is broken as it stands.
    Abandoned,
}

/// One file that is not usable yet: the version last seen, and since when.
#[derive(Debug, Default)]
pub struct UnfinishedWrite {
    last_change: Option<(FileVersion, Instant)>,
}

impl UnfinishedWrite {
    /// Judges the file as it is now (`version`): a version not seen before starts the quiet period again.
    pub fn judge(&mut self, version: FileVersion) -> Verdict {
        self.judge_at(version, Instant::now())
    }

    fn judge_at(&mut self, version: FileVersion, now: Instant) -> Verdict {
        match self.last_change {
            Some((seen, since)) if seen == version => {
                let until = since + QUIET_PERIOD;
                if now >= until {
                    Verdict::Abandoned
                } else {
                    Verdict::Wait { until }
                }
            }
            _ => {
                self.last_change = Some((version, now));
                Verdict::Wait { until: now + QUIET_PERIOD }
            }
        }
    }

    /// When the file is judged if it does not change before.
    fn verdict_at(&self) -> Option<Instant> {
        self.last_change.map(|(_, since)| since + QUIET_PERIOD)
    }
}

/// The files of a folder that are not usable yet, by a key of the caller's (a request id, a path).
#[derive(Debug)]
pub struct UnfinishedWrites<K> {
    files: HashMap<K, UnfinishedWrite>,
}

impl<K> Default for UnfinishedWrites<K> {
    fn default() -> Self {
        UnfinishedWrites { files: HashMap::new() }
    }
}

impl<K: Eq + Hash> UnfinishedWrites<K> {
    /// Judges the file `key` as it is now ([`UnfinishedWrite::judge`]); an abandoned file is forgotten here (the
    /// caller answers it).
    pub fn judge(&mut self, key: K, version: FileVersion) -> Verdict {
        self.judge_at(key, version, Instant::now())
    }

    fn judge_at(&mut self, key: K, version: FileVersion, now: Instant) -> Verdict {
        match self.files.entry(key) {
            Entry::Occupied(mut seen) => {
                let verdict = seen.get_mut().judge_at(version, now);
                if verdict == Verdict::Abandoned {
                    seen.remove();
                }
                verdict
            }
            Entry::Vacant(new) => new.insert(UnfinishedWrite::default()).judge_at(version, now),
        }
    }

    /// The file became usable, or is gone: it is not waited for any more.
    pub fn forget<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.files.remove(key);
    }

    /// Keeps only the files `keep` accepts: a caller that finds its files by listing the folder forgets those that
    /// are no longer there to look at (removed, or answered by someone else), or their verdicts, past and never
    /// reached, would end every wait at once.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.files.retain(|key, _| keep(key));
    }

    /// The earliest moment a file here is judged: the latest a caller should look again.
    pub fn next_verdict(&self) -> Option<Instant> {
        self.files.values().filter_map(UnfinishedWrite::verdict_at).min()
    }

    /// The files whose verdict is due by `now`: to read again, and to answer if they did not change.
    pub fn due(&self, now: Instant) -> Vec<K>
    where
        K: Clone,
    {
        let due = |file: &UnfinishedWrite| file.verdict_at().is_some_and(|at| at <= now);
        self.files.iter().filter(|(_, file)| due(file)).map(|(key, _)| key.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two versions of one file, as a write in place leaves them.
    fn versions() -> (tempfile::TempDir, FileVersion, FileVersion) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "{").unwrap();
        let one = FileVersion::of(&path).unwrap();
        std::fs::write(&path, "{\"a\"").unwrap();
        (dir, one, FileVersion::of(&path).unwrap())
    }

    #[test]
    fn a_file_is_abandoned_only_after_the_quiet_period_since_its_last_change() {
        let (_dir, one, two) = versions();
        let start = Instant::now();
        let mut file = UnfinishedWrite::default();
        assert_eq!(file.judge_at(one, start), Verdict::Wait { until: start + QUIET_PERIOD });
        let later = start + QUIET_PERIOD - Duration::from_millis(1);
        assert_eq!(file.judge_at(one, later), Verdict::Wait { until: start + QUIET_PERIOD });
        // Changed just before it would have been judged: the period starts again, from this change.
        assert_eq!(file.judge_at(two, later), Verdict::Wait { until: later + QUIET_PERIOD });
        assert_eq!(file.judge_at(two, start + QUIET_PERIOD), Verdict::Wait { until: later + QUIET_PERIOD });
        assert_eq!(file.judge_at(two, later + QUIET_PERIOD), Verdict::Abandoned);
    }

    #[test]
    fn files_are_judged_apart_and_the_earliest_verdict_is_known() {
        let (_dir, one, two) = versions();
        let start = Instant::now();
        let mut files = UnfinishedWrites::default();
        assert!(files.is_empty() && files.next_verdict().is_none());
        files.judge_at("a".to_owned(), one, start);
        let second = start + Duration::from_millis(500);
        files.judge_at("b".to_owned(), two, second);
        assert_eq!(files.next_verdict(), Some(start + QUIET_PERIOD));
        assert_eq!(files.due(start + QUIET_PERIOD), ["a"]);
        assert_eq!(files.judge_at("a".to_owned(), one, start + QUIET_PERIOD), Verdict::Abandoned);
        assert_eq!(files.next_verdict(), Some(second + QUIET_PERIOD), "an abandoned file is forgotten");
        files.judge_at("c".to_owned(), one, second);
        files.retain(|key| key != "c");
        assert_eq!(files.due(second + QUIET_PERIOD), ["b"], "c is forgotten");
        files.forget("b");
        assert!(files.is_empty());
        assert!(files.due(second + QUIET_PERIOD).is_empty());
    }
}
