//! One stream of a named run, kept for replay: in memory up to [`MEMORY_PER_STREAM`], then in a spill file under
//! the state folder, and never more than the per-run cap (`--run-log-max`): beyond it the first half is kept as the
//! head, the last half as a rolling tail, and the middle is counted as dropped.
//!
//! One mapping serves every phase: stream offset `o` lives at position `o` while `o` is in the head, and at
//! `head + (o - head) % tail` after it. Until the cap is reached that is simply `o`, so nothing is ever moved when the
//! tail starts rolling, and a reader at any offset knows where its bytes are (or that they are gone).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

/// Bytes of one stream a run keeps in memory before it spills to a file: small, so that `--max-runs` runs of
/// anything stay within `2 × max_runs × 256 KiB` of memory.
pub const MEMORY_PER_STREAM: u64 = 256 * 1024;

/// Where a stream's bytes are kept.
#[derive(Debug)]
enum Store {
    Memory(Vec<u8>),
    /// The spill file and its path (removed when the log is dropped, i.e. when its run is forgotten).
    File(File, PathBuf),
}

/// A stream of one named run.
#[derive(Debug)]
pub struct StreamLog {
    store: Store,
    /// Every byte the stream produced, kept or not.
    total: u64,
    /// Bytes kept from the start once the cap is passed.
    head: u64,
    /// Bytes kept at the end once the cap is passed (the ring after the head).
    tail: u64,
    memory_limit: u64,
    /// Where the spill file goes, made when it is needed.
    spill_path: PathBuf,
}

/// What a reader at some offset finds.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Bytes from the offset asked for.
    Bytes(Vec<u8>),
    /// The offset is in the dropped middle: this many bytes from it are gone.
    Dropped(u64),
    /// Nothing beyond the offset yet.
    End,
}

impl StreamLog {
    /// A log capped at `cap` bytes (≥ 2) that spills to `spill_path` beyond `memory_limit` bytes.
    pub fn new(cap: u64, memory_limit: u64, spill_path: PathBuf) -> Self {
        let cap = cap.max(2);
        let head = cap / 2;
        StreamLog { store: Store::Memory(Vec::new()), total: 0, head, tail: cap - head, memory_limit, spill_path }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The first offset kept after the head: everything in `head..kept_from()` is dropped.
    fn kept_from(&self) -> u64 {
        self.total.saturating_sub(self.tail).max(self.head).min(self.total)
    }

    /// Bytes dropped so far (the middle).
    pub fn dropped(&self) -> u64 {
        self.kept_from() - self.head.min(self.total)
    }

    /// The spill file, if the stream spilled.
    pub fn spill_file(&self) -> Option<&PathBuf> {
        match &self.store {
            Store::File(_, path) => Some(path),
            Store::Memory(_) => None,
        }
    }

    /// Where offset `offset` (kept) lives in the store.
    fn position(&self, offset: u64) -> u64 {
        if offset < self.head {
            offset
        } else {
            self.head + (offset - self.head) % self.tail
        }
    }

    /// Appends the stream's next bytes: those that fall in the head go there, those that fall in the last `tail`
    /// bytes of the stream go to the ring, the rest only count.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let start = self.total;
        self.total += bytes.len() as u64;
        let index = |offset: u64| usize::try_from(offset - start).unwrap_or(bytes.len());
        if start < self.head {
            let end = self.head.min(self.total);
            self.write(start, &bytes[..index(end)])?;
        }
        let from = start.max(self.head).max(self.kept_from());
        if from < self.total {
            self.write_ring(from, &bytes[index(from)..])?;
        }
        Ok(())
    }

    /// Writes bytes starting at `offset` (past the head), wrapping around the tail ring.
    fn write_ring(&mut self, mut offset: u64, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let position = self.position(offset);
            let room = self.head + self.tail - position;
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
            self.write(offset, &bytes[..take])?;
            bytes = &bytes[take..];
            offset += take as u64;
        }
        Ok(())
    }

    /// Writes `bytes` (not crossing the end of the store) for `offset`, spilling first when memory is full.
    fn write(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let position = self.position(offset);
        let end = position + bytes.len() as u64;
        if matches!(self.store, Store::Memory(_)) && end > self.memory_limit {
            self.spill()?;
        }
        match &mut self.store {
            Store::Memory(memory) => {
                let (start, end) = (usize::try_from(position).unwrap_or(0), usize::try_from(end).unwrap_or(0));
                if memory.len() < end {
                    memory.resize(end, 0);
                }
                memory[start..end].copy_from_slice(bytes);
                Ok(())
            }
            Store::File(file, _) => file.write_all_at(bytes, position),
        }
    }

    /// Moves what memory holds into a new spill file (mode 0600, in the state folder).
    fn spill(&mut self) -> std::io::Result<()> {
        let file =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&self.spill_path)?;
        if let Store::Memory(memory) = &self.store {
            file.write_all_at(memory, 0)?;
        }
        self.store = Store::File(file, self.spill_path.clone());
        Ok(())
    }

    /// Up to `max` bytes from `offset` (which must be ≤ the total), or the dropped gap it is in.
    pub fn read(&self, offset: u64, max: usize) -> std::io::Result<Read> {
        if offset >= self.total {
            return Ok(Read::End);
        }
        let kept_from = self.kept_from();
        if offset >= self.head && offset < kept_from {
            return Ok(Read::Dropped(kept_from - offset));
        }
        // Up to the end of the head, of the ring, or of the stream, whichever comes first.
        let position = self.position(offset);
        let segment_end = if offset < self.head { self.head } else { self.head + self.tail };
        let len = (segment_end - position).min(self.total - offset).min(max as u64);
        let len = usize::try_from(len).unwrap_or(max);
        let mut out = vec![0; len];
        match &self.store {
            Store::Memory(memory) => {
                // Short only when a spill failed and the bytes were counted but not kept: an error, not a panic.
                let start = usize::try_from(position).unwrap_or(usize::MAX);
                let kept = memory.get(start..).unwrap_or_default();
                if kept.is_empty() {
                    return Err(std::io::Error::other(
                        "these bytes were not kept: the spill file could not be written",
                    ));
                }
                let kept = &kept[..kept.len().min(len)];
                out.truncate(kept.len());
                out.copy_from_slice(kept);
            }
            Store::File(file, _) => file.read_exact_at(&mut out, position)?,
        }
        Ok(Read::Bytes(out))
    }
}

impl Drop for StreamLog {
    fn drop(&mut self) {
        if let Store::File(_, path) = &self.store {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a reader from `offset` gets: bytes, and a marker for each gap.
    fn replay(log: &StreamLog, mut offset: u64) -> (Vec<u8>, u64) {
        let (mut out, mut dropped) = (Vec::new(), 0);
        loop {
            match log.read(offset, 7).unwrap() {
                Read::Bytes(bytes) => {
                    offset += bytes.len() as u64;
                    out.extend(bytes);
                }
                Read::Dropped(gap) => {
                    offset += gap;
                    dropped += gap;
                }
                Read::End => return (out, dropped),
            }
        }
    }

    fn check(cap: u64, memory: u64, pieces: &[usize]) {
        let dir = std::env::temp_dir().join(format!("runlog-test-{}-{cap}-{memory}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let mut log = StreamLog::new(cap, memory, dir.clone());
        let mut all = Vec::new();
        let mut counter = 0u8;
        for &len in pieces {
            let piece: Vec<u8> = (0..len)
                .map(|_| {
                    counter = counter.wrapping_add(1);
                    counter
                })
                .collect();
            log.append(&piece).unwrap();
            all.extend(piece);
        }
        let total = all.len() as u64;
        assert_eq!(log.total(), total);
        let head = cap / 2;
        let expected: Vec<u8> = if total <= cap {
            all.clone()
        } else {
            let tail_len = usize::try_from(cap - head).unwrap();
            [&all[..usize::try_from(head).unwrap()], &all[all.len() - tail_len..]].concat()
        };
        let (kept, dropped) = replay(&log, 0);
        assert_eq!(kept, expected, "cap {cap} memory {memory} pieces {pieces:?}");
        assert_eq!(dropped, total.saturating_sub(cap));
        assert_eq!(log.dropped(), dropped);
        // From any offset: every kept byte at or after it.
        let kept_at = |i: u64| total <= cap || i < head || i >= total - (cap - head);
        for from in 0..=total {
            let want: Vec<u8> =
                (from..total).filter(|&i| kept_at(i)).map(|i| all[usize::try_from(i).unwrap()]).collect();
            assert_eq!(replay(&log, from).0, want, "from {from}");
        }
        assert_eq!(log.spill_file().is_some(), total.min(cap) > memory);
        drop(log);
        assert!(!dir.exists(), "the spill file goes with the log");
    }

    #[test]
    fn a_spill_that_fails_is_an_error_for_writer_and_reader_never_a_panic() {
        let mut log = StreamLog::new(1000, 10, PathBuf::from("/nonexistent-folder/x.stdout"));
        log.append(b"12345").unwrap();
        assert!(log.append(b"6789012345").is_err());
        assert_eq!(log.total(), 15, "the bytes still count");
        assert_eq!(log.read(0, 100).unwrap(), Read::Bytes(b"12345".to_vec()));
        assert!(log.read(5, 100).is_err());
    }

    #[test]
    fn head_and_rolling_tail_in_memory_and_spilled() {
        check(1000, 10_000, &[3, 5, 100]);
        check(20, 10_000, &[3, 5, 100, 1, 1, 7, 33]);
        check(21, 10_000, &[50]);
        check(20, 8, &[3, 5, 100, 1, 1, 7, 33]);
        check(20, 8, &[9]);
        check(64, 16, &[10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3, 200]);
        check(2, 1, &[1, 1, 1, 5]);
    }
}
