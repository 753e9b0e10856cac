//! One stream of a named run, kept for replay: in memory up to [`MEMORY_PER_STREAM`], then in a spill file under
//! the state folder, and never more than the per-run cap (`--run-log-max`): beyond it the first half is kept as the
//! head, the last half as a rolling tail, and the middle is counted as dropped.
//!
//! One mapping serves every phase: stream offset `o` lives at position `o` while `o` is in the head, and at
//! `head + (o - head) % tail` after it. Until the cap is reached that is simply `o`, so nothing is ever moved when the
//! tail starts rolling, and a reader at any offset knows where its bytes are (or that they are gone).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;

/// Bytes of one stream a run keeps in memory: before it spills to a file, the stream's first bytes; after, its
/// latest chunks, which live readers take without reading the file back. Small, so that `--max-runs` runs of
/// anything stay within `2 × max_runs × 256 KiB` of memory (plus the chunk being written, per running run).
pub const MEMORY_PER_STREAM: u64 = 256 * 1024;

/// The spill file is given disk space this far ahead of its writes (never beyond the cap): one `fallocate` per step
/// instead of the file system finding room for every page written, ~30% less CPU per byte written on ext4 (measured
/// by bench/spill-write.py).
pub const ALLOCATE_STEP: u64 = 8 * 1024 * 1024;

/// Where a stream's bytes are kept.
#[derive(Debug)]
enum Store {
    Memory(Vec<u8>),
    /// The spill file (shared with the writes and reads made outside the run's lock) and its path (removed when the
    /// log is dropped, i.e. when its run is forgotten).
    File(Arc<File>, PathBuf),
}

/// A stream of one named run. It lives under its run's lock; the writes to the spill file and the reads from it are
/// made outside that lock ([`Pending`], [`FileRead`]), so that the command's output and its readers never wait for
/// each other's disk access or encoding.
#[derive(Debug)]
pub struct StreamLog {
    store: Store,
    /// Every byte the stream produced, kept or not.
    total: u64,
    /// Offsets below this are in the store: beyond it, bytes are still being written (and are in `recent`).
    written: u64,
    /// The first offset a write to the spill file failed for: from there on the file is not read.
    failed_at: Option<u64>,
    /// Bytes kept from the start once the cap is passed.
    head: u64,
    /// Bytes kept at the end once the cap is passed (the ring after the head).
    tail: u64,
    memory_limit: u64,
    /// Where the spill file goes, made when it is needed.
    spill_path: PathBuf,
    /// After the spill, while the run goes: its latest chunks with their offsets, contiguous up to `total`. A chunk
    /// leaves only once written and when the rest exceed `memory_limit`.
    recent: VecDeque<(u64, Bytes)>,
    recent_len: u64,
    /// Bytes of the spill file given disk space so far.
    allocated: u64,
    /// Writes to the spill file not yet taken by the writer ([`StreamLog::take_writes`]).
    unwritten: Vec<(u64, Bytes)>,
}

/// What a reader at some offset finds.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Bytes from the offset asked for.
    Bytes(Bytes),
    /// The offset is in the dropped middle: this many bytes from it are gone.
    Dropped(u64),
    /// Nothing beyond the offset yet.
    End,
}

/// Where a reader's bytes are: found under the lock, or to be read from the spill file outside it.
#[derive(Debug)]
pub enum Found {
    Now(Read),
    /// Read it with [`FileRead::read`], then check [`StreamLog::still_kept`]: the rolling tail may have overwritten
    /// it meanwhile.
    File(FileRead),
}

/// A read of the spill file, made outside the run's lock.
#[derive(Debug)]
pub struct FileRead {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl FileRead {
    pub fn read(&self) -> std::io::Result<Bytes> {
        let mut out = vec![0; self.len];
        self.file.read_exact_at(&mut out, self.position)?;
        Ok(Bytes::from(out))
    }
}

/// The spill-file writes of the chunks appended since the last ones ([`StreamLog::take_writes`]), made by the run's
/// only writer outside its lock, in one `pwritev` per run of adjacent positions; then [`StreamLog::written`] says
/// they are done.
#[derive(Debug, Default)]
#[must_use = "the bytes are only kept once written"]
pub struct Pending {
    file: Option<Arc<File>>,
    /// Disk space to give the file first (offset, length): see [`ALLOCATE_STEP`].
    allocate: Option<(u64, u64)>,
    writes: Vec<(u64, Bytes)>,
    /// The stream offset they complete.
    end: u64,
}

impl Pending {
    pub fn write(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        if let Some((offset, len)) = self.allocate {
            // Only a saving: a file system without it (or a full disk, which the write then reports) is no error here.
            let (offset, len) = (i64::try_from(offset).unwrap_or(i64::MAX), i64::try_from(len).unwrap_or(0));
            let _ = nix::fcntl::fallocate(file, nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE, offset, len);
        }
        let mut writes = self.writes.as_slice();
        while let Some((position, _)) = writes.first() {
            // The writes that continue where the one before ended: one system call.
            let mut end = *position;
            let adjacent = writes
                .iter()
                .take_while(|(at, bytes)| {
                    let next = *at == end;
                    end += bytes.len() as u64;
                    next
                })
                .count();
            write_all_vectored_at(file, *position, &writes[..adjacent])?;
            writes = &writes[adjacent..];
        }
        Ok(())
    }

    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// Writes `writes` (adjacent, in order) at `position`, however short each `pwritev` is.
fn write_all_vectored_at(file: &File, mut position: u64, writes: &[(u64, Bytes)]) -> std::io::Result<()> {
    let mut slices: Vec<&[u8]> = writes.iter().map(|(_, bytes)| &bytes[..]).collect();
    let mut slices = slices.as_mut_slice();
    while !slices.is_empty() {
        let iov: Vec<std::io::IoSlice<'_>> = slices.iter().take(1024).map(|s| std::io::IoSlice::new(s)).collect();
        let offset = i64::try_from(position).map_err(|_| std::io::Error::other("spill file offset out of range"))?;
        let mut done = match nix::sys::uio::pwritev(file, &iov, offset) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => return Err(err.into()),
        };
        position += done as u64;
        while let Some(first) = slices.first_mut() {
            if done < first.len() {
                *first = &first[done..];
                break;
            }
            done -= first.len();
            slices = &mut slices[1..];
        }
    }
    Ok(())
}

impl StreamLog {
    /// A log capped at `cap` bytes (≥ 2) that spills to `spill_path` beyond `memory_limit` bytes.
    pub fn new(cap: u64, memory_limit: u64, spill_path: PathBuf) -> Self {
        let cap = cap.max(2);
        let head = cap / 2;
        StreamLog {
            store: Store::Memory(Vec::new()),
            total: 0,
            written: 0,
            failed_at: None,
            head,
            tail: cap - head,
            memory_limit,
            spill_path,
            recent: VecDeque::new(),
            recent_len: 0,
            allocated: 0,
            unwritten: Vec::new(),
        }
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

    /// Appends the stream's next chunk: the bytes that fall in the head go there, those that fall in the last
    /// `tail` bytes of the stream go to the ring, the rest only count. In memory that is done here; once spilled,
    /// the writes wait for [`StreamLog::take_writes`] (made outside the lock), and until [`StreamLog::written`]
    /// readers take the chunk from memory. An error (the spill file cannot be made) keeps the count and says what
    /// was not kept.
    pub fn append(&mut self, chunk: Bytes) -> std::io::Result<()> {
        let start = self.total;
        self.total += chunk.len() as u64;
        let mut writes = Vec::new();
        let index = |offset: u64| usize::try_from(offset - start).unwrap_or(chunk.len());
        if start < self.head {
            let end = self.head.min(self.total);
            writes.push((self.position(start), chunk.slice(..index(end))));
        }
        let mut offset = start.max(self.head).max(self.kept_from());
        while offset < self.total {
            // Up to the end of the ring, then around.
            let position = self.position(offset);
            let room = self.head + self.tail - position;
            let take = room.min(self.total - offset);
            writes.push((position, chunk.slice(index(offset)..index(offset + take))));
            offset += take;
        }
        let end = writes.iter().map(|(position, bytes)| position + bytes.len() as u64).max().unwrap_or(0);
        if matches!(self.store, Store::Memory(_)) && end > self.memory_limit {
            self.spill()?;
        }
        match &mut self.store {
            Store::Memory(memory) => {
                for (position, bytes) in writes {
                    let from = usize::try_from(position).unwrap_or(usize::MAX);
                    let to = from.saturating_add(bytes.len());
                    if memory.len() < to {
                        memory.resize(to, 0);
                    }
                    memory[from..to].copy_from_slice(&bytes);
                }
                self.written = self.total;
            }
            Store::File(..) => {
                if !chunk.is_empty() {
                    self.recent_len += chunk.len() as u64;
                    self.recent.push_back((start, chunk));
                }
                self.unwritten.extend(writes);
            }
        }
        Ok(())
    }

    /// The writes of everything appended so far, for the writer to make outside the lock.
    pub fn take_writes(&mut self) -> Pending {
        let Store::File(file, _) = &self.store else { return Pending { end: self.total, ..Pending::default() } };
        let writes = std::mem::take(&mut self.unwritten);
        let end = writes.iter().map(|(position, bytes)| position + bytes.len() as u64).max().unwrap_or(0);
        let allocate = (end > self.allocated).then(|| {
            let upto = (end + ALLOCATE_STEP).min(self.head + self.tail).max(end);
            let from = std::mem::replace(&mut self.allocated, upto);
            (from, upto - from)
        });
        Pending { file: Some(file.clone()), allocate, writes, end: self.total }
    }

    /// The writes of [`StreamLog::take_writes`] up to stream offset `end` are done (`ok`) or failed: chunks beyond
    /// the memory share leave the recent window.
    pub fn written(&mut self, end: u64, ok: bool) {
        if !ok {
            self.failed_at.get_or_insert(self.written);
        }
        self.written = self.written.max(end);
        // Keep at least `memory_limit` of the latest bytes for readers close behind.
        while let Some((start, chunk)) = self.recent.front() {
            let len = chunk.len() as u64;
            if start + len > self.written || self.recent_len - len < self.memory_limit {
                break;
            }
            self.recent_len -= len;
            self.recent.pop_front();
        }
    }

    /// The run has ended and every write is done: the recent chunks' memory goes (the store has them all).
    pub fn seal(&mut self) {
        if self.written >= self.total {
            self.recent.clear();
            self.recent_len = 0;
        }
    }

    /// Moves what memory holds into a new spill file (mode 0600, in the state folder).
    fn spill(&mut self) -> std::io::Result<()> {
        let file =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&self.spill_path)?;
        if let Store::Memory(memory) = &self.store {
            file.write_all_at(memory, 0)?;
        }
        self.store = Store::File(Arc::new(file), self.spill_path.clone());
        Ok(())
    }

    /// Up to `max` bytes from `offset` (which must be ≤ the total), the dropped gap it is in, or where in the spill
    /// file to read them.
    pub fn read(&self, offset: u64, max: usize) -> std::io::Result<Found> {
        if offset >= self.total {
            return Ok(Found::Now(Read::End));
        }
        let kept_from = self.kept_from();
        if offset >= self.head && offset < kept_from {
            return Ok(Found::Now(Read::Dropped(kept_from - offset)));
        }
        // Up to the end of the head, of the ring, or of the stream, whichever comes first.
        let position = self.position(offset);
        let segment_end = if offset < self.head { self.head } else { self.head + self.tail };
        let len = (segment_end - position).min(self.total - offset).min(max as u64);
        if let Some(bytes) = self.read_recent(offset, len) {
            return Ok(Found::Now(Read::Bytes(bytes)));
        }
        // Not in the recent chunks, so written (they hold every byte from `written` on): read no further than that.
        let len = usize::try_from(len.min(self.written.saturating_sub(offset))).unwrap_or(max);
        let not_kept = || std::io::Error::other("these bytes were not kept: the spill file could not be written");
        match &self.store {
            Store::Memory(memory) => {
                // Short only when a spill failed and the bytes were counted but not kept: an error, not a panic.
                let start = usize::try_from(position).unwrap_or(usize::MAX);
                let kept = memory.get(start..).unwrap_or_default();
                if kept.is_empty() {
                    return Err(not_kept());
                }
                Ok(Found::Now(Read::Bytes(Bytes::copy_from_slice(&kept[..kept.len().min(len)]))))
            }
            Store::File(..) if self.failed_at.is_some_and(|failed| offset >= failed) => Err(not_kept()),
            Store::File(file, _) => Ok(Found::File(FileRead { file: file.clone(), position, len })),
        }
    }

    /// Up to `len` bytes from `offset` out of the recent chunks, if they still hold it.
    fn read_recent(&self, offset: u64, len: u64) -> Option<Bytes> {
        let first = self.recent.front()?.0;
        if offset < first {
            return None;
        }
        // Chunks are contiguous: find the one holding `offset` by a binary search on their starts.
        let at = self.recent.partition_point(|(start, _)| *start <= offset) - 1;
        let (start, chunk) = &self.recent[at];
        let from = usize::try_from(offset - start).ok()?;
        let to = from + usize::try_from(len).ok()?.min(chunk.len() - from);
        Some(chunk.slice(from..to))
    }

    /// After a [`FileRead`] from `offset`: whether its bytes were still those of `offset` (the rolling tail
    /// overwrites a position only once the stream has passed `offset + tail`, which moves `kept_from` past it).
    pub fn still_kept(&self, offset: u64) -> bool {
        offset < self.head || offset >= self.kept_from()
    }
}

impl Drop for StreamLog {
    /// Removes the spill file: its name at once; its pages, which closing a large file frees from the page cache
    /// (~15 ms for 224 MiB), on a blocking thread when there is a runtime: not in the request that forgot the run,
    /// nor under the registry's lock when the sweeper forgets many.
    fn drop(&mut self) {
        let Store::File(file, path) = std::mem::replace(&mut self.store, Store::Memory(Vec::new())) else { return };
        let _ = std::fs::remove_file(&path);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn_blocking(move || drop(file)));
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
            let read = match log.read(offset, 7).unwrap() {
                Found::Now(read) => read,
                Found::File(file) => {
                    let bytes = file.read().unwrap();
                    assert!(log.still_kept(offset));
                    Read::Bytes(bytes)
                }
            };
            match read {
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

    /// Appends as a run does: the writes outside, then done.
    fn append(log: &mut StreamLog, bytes: &[u8]) -> std::io::Result<()> {
        log.append(Bytes::copy_from_slice(bytes))?;
        let pending = log.take_writes();
        let written = pending.write();
        log.written(pending.end(), written.is_ok());
        written
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
            append(&mut log, &piece).unwrap();
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
        // Once the run ends the recent chunks go: the same bytes, from the store alone.
        let mut sealed = StreamLog::new(cap, memory, dir.with_extension("sealed"));
        for piece in all.chunks(pieces.iter().copied().max().unwrap_or(1)) {
            append(&mut sealed, piece).unwrap();
        }
        sealed.seal();
        assert_eq!(replay(&sealed, 0), (expected.clone(), total.saturating_sub(cap)), "sealed");
        drop(sealed);
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
        append(&mut log, b"12345").unwrap();
        assert!(append(&mut log, b"6789012345").is_err());
        assert_eq!(log.total(), 15, "the bytes still count");
        assert!(matches!(log.read(0, 100).unwrap(), Found::Now(Read::Bytes(bytes)) if bytes == b"12345"[..]));
        assert!(log.read(5, 100).is_err());
    }

    #[test]
    fn a_file_read_overtaken_by_the_rolling_tail_is_not_kept() {
        let path = std::env::temp_dir().join(format!("runlog-test-{}-overtaken", std::process::id()));
        let mut log = StreamLog::new(20, 4, path);
        append(&mut log, b"0123456789abcdef").unwrap();
        log.seal();
        let Found::File(read) = log.read(12, 4).unwrap() else { panic!("offset 12 is in the spill file") };
        assert!(log.still_kept(12));
        // Offset 12 sits at position 12 of the ring (head 10, tail 10); 10 more bytes overwrite it.
        append(&mut log, b"ABCDEFGHIJ").unwrap();
        assert_eq!(&read.read().unwrap()[..], b"GHIJ", "offsets 22..26 now hold positions 12..16");
        assert!(!log.still_kept(12), "the reader must not take the new bytes for offset 12's");
        assert!(log.still_kept(3), "the head is never overwritten");
    }

    #[test]
    fn a_read_from_the_file_stops_where_the_unwritten_chunks_begin() {
        let path = std::env::temp_dir().join(format!("runlog-test-{}-unwritten", std::process::id()));
        let mut log = StreamLog::new(1000, 8, path);
        log.append(Bytes::from_static(b"01234")).unwrap();
        // This chunk spills the first one to the file and waits in memory for its own write.
        log.append(Bytes::from_static(b"56789")).unwrap();
        let Found::File(read) = log.read(2, 100).unwrap() else { panic!("offset 2 is in the spill file") };
        assert_eq!(&read.read().unwrap()[..], b"234", "only what was written");
        assert!(matches!(log.read(5, 100).unwrap(), Found::Now(Read::Bytes(bytes)) if bytes == b"56789"[..]));
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
