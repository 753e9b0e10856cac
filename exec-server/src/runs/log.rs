//! One stream of a named run, kept for replay: in memory while the server's budget for it allows
//! (`--run-memory`, [`Budget`]), then in a spill file under the state folder, and never more than the per-run cap
//! (`--run-log-max`): beyond it the first half is kept as the head, the last half as a rolling tail, and the middle
//! is counted as dropped.
//!
//! In memory a stream is the chunks as they were read from the command's pipe, shared, never copied: keeping a run's
//! output costs no copy of it until it spills. The spill file then gets every kept byte (written by the run's
//! writer, outside the run's lock), and the latest [`MEMORY_PER_STREAM`] bytes stay in memory for the readers
//! following the run.
//!
//! One mapping serves every phase: stream offset `o` lives at position `o` while `o` is in the head, and at
//! `head + (o - head) % tail` after it. Until the cap is reached that is simply `o`, so nothing is ever moved when the
//! tail starts rolling, and a reader at any offset knows where its bytes are (or that they are gone).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// The latest bytes of a spilled stream kept in memory while its run goes, for the readers following it (who are
/// never further behind: see `PACE_LAG`), plus the chunks its writer has not written yet.
pub const MEMORY_PER_STREAM: u64 = 256 * 1024;

/// What a chunk kept in memory costs besides its bytes (its allocation, its `Bytes`, its place in the deque), so
/// that a command printing a byte at a time cannot hold far more memory than the budget counts.
pub const CHUNK_OVERHEAD: u64 = 96;

/// The memory all named runs' logs may hold in all (`--run-memory`), as chunks kept in memory. A stream that would
/// pass it spills. Shared by every log of a server.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
}

impl Budget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Budget { limit, used: AtomicU64::new(0) })
    }

    /// Takes `bytes` of the budget if they fit.
    fn charge(&self, bytes: u64) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let Some(after) = used.checked_add(bytes).filter(|after| *after <= self.limit) else { return false };
            match self.used.compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Bytes in use now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// The spill file is given disk space this far ahead of its writes (never beyond the cap): one `fallocate` per step
/// instead of the file system finding room for every page written, less CPU per byte written on ext4 (bench/spill-write.py
/// measures both).
pub const ALLOCATE_STEP: u64 = 8 * 1024 * 1024;

/// Where a stream's bytes are kept.
#[derive(Debug)]
enum Store {
    /// The kept chunks are all in `head_chunks` and `recent`, charged to the budget.
    Memory,
    /// The spill file, nameless (made in `spill_path`'s folder, `spill_file`), shared with the writes and reads made
    /// outside the run's lock; gone when the last descriptor is (the log dropped, i.e. its run forgotten).
    File(Arc<File>),
}

/// A stream of one named run. It lives under its run's lock; the writes to the spill file and the reads from it are
/// made outside that lock ([`Pending`], [`FileRead`]), so that the command's output and its readers never wait for
/// each other's disk access or encoding.
#[derive(Debug)]
pub struct OutputLog {
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
    budget: Arc<Budget>,
    /// What this log holds of the budget.
    charged: u64,
    /// Where the spill file goes, made when it is needed.
    spill_path: PathBuf,
    /// Chunks with their offsets, in order: in memory, the kept ones after the head (the dropped middle before them
    /// is let go); after the spill, while the run goes, the latest ones, up to `total` (there a chunk leaves only
    /// once written and when the rest hold [`MEMORY_PER_STREAM`]).
    recent: VecDeque<(u64, Bytes)>,
    recent_len: u64,
    /// In memory, the chunks that start in the head (the tail's are in `recent`, so that letting go of the dropped
    /// middle takes them from its front).
    head_chunks: VecDeque<(u64, Bytes)>,
    /// Bytes of the spill file given disk space so far.
    allocated: u64,
    /// Writes to the spill file not yet taken by the writer ([`OutputLog::take_writes`]).
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
    /// Read it with [`FileRead::read`], then check [`OutputLog::still_kept`]: the rolling tail may have overwritten
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
        self.file.read_exact_at(&mut out, self.position).map_err(|err| match err.kind() {
            std::io::ErrorKind::UnexpectedEof => std::io::Error::other(format!(
                "the spill file ends before byte {}, which was written to it",
                self.position + self.len as u64
            )),
            _ => err,
        })?;
        Ok(Bytes::from(out))
    }
}

/// The spill-file writes of the chunks appended since the last ones ([`OutputLog::take_writes`]), made by the run's
/// only writer outside its lock, in one `pwritev` per run of adjacent positions; then [`OutputLog::written`] says
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

impl OutputLog {
    /// A log capped at `cap` bytes (≥ 2) that keeps its chunks in memory while `budget` allows, then spills to
    /// `spill_path`.
    pub fn new(cap: u64, budget: Arc<Budget>, spill_path: PathBuf) -> Self {
        let cap = cap.max(2);
        let head = cap / 2;
        OutputLog {
            store: Store::Memory,
            total: 0,
            written: 0,
            failed_at: None,
            head,
            tail: cap - head,
            budget,
            charged: 0,
            spill_path,
            recent: VecDeque::new(),
            recent_len: 0,
            head_chunks: VecDeque::new(),
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

    /// Whether the stream spilled (to a file without a name).
    pub fn spilled(&self) -> bool {
        matches!(self.store, Store::File(_))
    }

    /// Where offset `offset` (kept) lives in the store.
    fn position(&self, offset: u64) -> u64 {
        if offset < self.head {
            offset
        } else {
            self.head + (offset - self.head) % self.tail
        }
    }

    /// The spill-file writes that keep what is still kept of the chunk that starts at `start`: the bytes that fall
    /// in the head go there, those in the last `tail` bytes of the stream go to the ring, the rest are dropped.
    fn plan(&self, start: u64, chunk: &Bytes) -> Vec<(u64, Bytes)> {
        let end = start + chunk.len() as u64;
        let mut writes = Vec::new();
        let index = |offset: u64| usize::try_from(offset - start).unwrap_or(chunk.len());
        if start < self.head {
            writes.push((self.position(start), chunk.slice(..index(self.head.min(end)))));
        }
        let mut offset = start.max(self.head).max(self.kept_from());
        while offset < end {
            // Up to the end of the ring, then around.
            let position = self.position(offset);
            let room = self.head + self.tail - position;
            let take = room.min(end - offset);
            writes.push((position, chunk.slice(index(offset)..index(offset + take))));
            offset += take;
        }
        writes
    }

    /// Appends the stream's next chunk. In memory it is kept as it is, while the budget allows; the chunk that
    /// would pass the budget spills the stream: every kept byte then waits for [`OutputLog::take_writes`] (made
    /// outside the lock), and until [`OutputLog::written`] readers take it from memory. An error (the spill file
    /// cannot be made) keeps the count and says what was not kept.
    pub fn append(&mut self, chunk: Bytes) -> std::io::Result<()> {
        let start = self.total;
        self.total += chunk.len() as u64;
        if chunk.is_empty() {
            return Ok(());
        }
        if matches!(self.store, Store::Memory) {
            let cost = chunk.len() as u64 + CHUNK_OVERHEAD;
            if self.budget.charge(cost) {
                self.charged += cost;
                if start < self.head {
                    self.head_chunks.push_back((start, chunk));
                } else {
                    self.keep_recent(start, chunk);
                }
                self.let_go_of_the_middle();
                self.written = self.total;
                return Ok(());
            }
            self.spill()?;
        }
        let writes = self.plan(start, &chunk);
        self.unwritten.extend(writes);
        self.keep_recent(start, chunk);
        Ok(())
    }

    fn keep_recent(&mut self, start: u64, chunk: Bytes) {
        self.recent_len += chunk.len() as u64;
        self.recent.push_back((start, chunk));
    }

    /// In memory: lets go of the chunks wholly in the dropped middle (the first of the tail's).
    fn let_go_of_the_middle(&mut self) {
        let kept_from = self.kept_from();
        while let Some((start, chunk)) = self.recent.front() {
            let len = chunk.len() as u64;
            if start + len > kept_from {
                break;
            }
            self.recent.pop_front();
            self.recent_len -= len;
            self.charged -= len + CHUNK_OVERHEAD;
            self.budget.release(len + CHUNK_OVERHEAD);
        }
    }

    /// The writes of everything appended so far, for the writer to make outside the lock.
    pub fn take_writes(&mut self) -> Pending {
        let Store::File(file) = &self.store else { return Pending { end: self.total, ..Pending::default() } };
        let writes = std::mem::take(&mut self.unwritten);
        let end = writes.iter().map(|(position, bytes)| position + bytes.len() as u64).max().unwrap_or(0);
        let allocate = (end > self.allocated).then(|| {
            let upto = (end + ALLOCATE_STEP).min(self.head + self.tail).max(end);
            let from = std::mem::replace(&mut self.allocated, upto);
            (from, upto - from)
        });
        Pending { file: Some(file.clone()), allocate, writes, end: self.total }
    }

    /// The writes of [`OutputLog::take_writes`] up to stream offset `end` are done (`ok`) or failed: chunks beyond
    /// the memory share leave the recent window.
    pub fn written(&mut self, end: u64, ok: bool) {
        if !ok {
            self.failed_at.get_or_insert(self.written);
        }
        self.written = self.written.max(end);
        // Keep at least MEMORY_PER_STREAM of the latest bytes for readers close behind.
        while let Some((start, chunk)) = self.recent.front() {
            let len = chunk.len() as u64;
            if start + len > self.written || self.recent_len - len < MEMORY_PER_STREAM {
                break;
            }
            self.recent_len -= len;
            self.recent.pop_front();
        }
    }

    /// The run has ended and every write is done: a spilled stream lets go of its recent chunks (the file has them
    /// all); one in memory keeps them, they are its store.
    pub fn seal(&mut self) {
        if matches!(self.store, Store::File(_)) && self.written >= self.total {
            self.recent.clear();
            self.recent_len = 0;
        }
    }

    /// Moves the stream to a new spill file (in the state folder, without a name: see `spill_file`): every kept
    /// chunk's bytes wait for the writer (readers take them from memory meanwhile), and the budget gets its share
    /// back.
    fn spill(&mut self) -> std::io::Result<()> {
        let file = super::spill_file::create_unnamed(&self.spill_path)?;
        let writes: Vec<(u64, Bytes)> =
            (self.head_chunks.iter().chain(&self.recent)).flat_map(|(start, chunk)| self.plan(*start, chunk)).collect();
        self.unwritten = writes;
        // Until written, the head's chunks are read from memory like the others.
        while let Some((start, chunk)) = self.head_chunks.pop_back() {
            self.recent_len += chunk.len() as u64;
            self.recent.push_front((start, chunk));
        }
        self.written = 0;
        self.budget.release(std::mem::take(&mut self.charged));
        self.store = Store::File(Arc::new(file));
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
            // In memory every kept byte is in a chunk: only bytes a failed spill did not keep are missing.
            Store::Memory => Err(not_kept()),
            Store::File(_) if self.failed_at.is_some_and(|failed| offset >= failed) => Err(not_kept()),
            Store::File(file) => Ok(Found::File(FileRead { file: file.clone(), position, len })),
        }
    }

    /// Up to `len` bytes from `offset` out of the chunks in memory, if they hold it.
    fn read_recent(&self, offset: u64, len: u64) -> Option<Bytes> {
        slice_of(&self.recent, offset, len).or_else(|| slice_of(&self.head_chunks, offset, len))
    }

    /// After a [`FileRead`] from `offset`: whether its bytes were still those of `offset` (the rolling tail
    /// overwrites a position only once the stream has passed `offset + tail`, which moves `kept_from` past it).
    pub fn still_kept(&self, offset: u64) -> bool {
        offset < self.head || offset >= self.kept_from()
    }
}

/// Up to `len` bytes from `offset` out of `chunks` (in order), if one holds it: the last that starts at or before
/// it, by a binary search on their starts (it may end before it: a gap, the dropped middle, or a chunk a failed spill
/// did not keep).
fn slice_of(chunks: &VecDeque<(u64, Bytes)>, offset: u64, len: u64) -> Option<Bytes> {
    let at = chunks.partition_point(|(start, _)| *start <= offset).checked_sub(1)?;
    let (start, chunk) = &chunks[at];
    let from = usize::try_from(offset - start).ok().filter(|from| *from < chunk.len())?;
    let to = from + usize::try_from(len).ok()?.min(chunk.len() - from);
    Some(chunk.slice(from..to))
}

impl Drop for OutputLog {
    /// Gives its memory back to the budget and removes the spill file (it has no name: closing it frees it). Its
    /// pages, which closing a large file frees from the page cache (milliseconds for a large one), go on a blocking thread
    /// when there is a runtime: not in the request that forgot the run, nor under the registry's lock when the
    /// sweeper forgets many.
    fn drop(&mut self) {
        self.budget.release(std::mem::take(&mut self.charged));
        let Store::File(file) = std::mem::replace(&mut self.store, Store::Memory) else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn_blocking(move || drop(file)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a reader from `offset` gets: bytes, and a marker for each gap.
    fn replay(log: &OutputLog, mut offset: u64) -> (Vec<u8>, u64) {
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
    fn append(log: &mut OutputLog, bytes: &[u8]) -> std::io::Result<()> {
        log.append(Bytes::copy_from_slice(bytes))?;
        let pending = log.take_writes();
        let written = pending.write();
        log.written(pending.end(), written.is_ok());
        written
    }

    fn check(cap: u64, memory: u64, pieces: &[usize]) {
        let dir = std::env::temp_dir().join(format!("runlog-test-{}-{cap}-{memory}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let mut log = OutputLog::new(cap, Budget::new(memory), dir.clone());
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
        let mut sealed = OutputLog::new(cap, Budget::new(memory), dir.with_extension("sealed"));
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
        if memory >= 10_000 {
            assert!(!log.spilled(), "within the budget: in memory");
        }
        if memory <= CHUNK_OVERHEAD && total > 0 {
            assert!(log.spilled(), "no chunk fits the budget");
        }
        drop(log);
        assert!(!dir.exists(), "the spill file goes with the log");
    }

    #[test]
    fn a_spill_that_fails_is_an_error_for_writer_and_reader_never_a_panic() {
        // The first chunk fits the budget (5 + 96 bytes), the second does not: the spill is tried, and fails.
        let mut log = OutputLog::new(1000, Budget::new(200), PathBuf::from("/nonexistent-folder/x.stdout"));
        append(&mut log, b"12345").unwrap();
        assert!(append(&mut log, b"6789012345").is_err());
        assert_eq!(log.total(), 15, "the bytes still count");
        assert!(matches!(log.read(0, 100).unwrap(), Found::Now(Read::Bytes(bytes)) if bytes == b"12345"[..]));
        assert!(log.read(5, 100).is_err());
    }

    /// A log (capped at `cap`) that spilled `bytes` at once, all written, its run ended.
    fn spilled(name: &str, cap: u64, bytes: &[u8]) -> OutputLog {
        let path = std::env::temp_dir().join(format!("runlog-test-{}-{name}", std::process::id()));
        let mut log = OutputLog::new(cap, Budget::new(0), path);
        append(&mut log, bytes).unwrap();
        log.seal();
        log
    }

    #[test]
    fn a_file_read_overtaken_by_the_rolling_tail_is_not_kept() {
        let mut log = spilled("overtaken", 20, b"0123456789abcdef");
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
        let mut log = spilled("unwritten", 1000, b"01234");
        // Not written yet: in memory only.
        log.append(Bytes::from_static(b"56789")).unwrap();
        let Found::File(read) = log.read(2, 100).unwrap() else { panic!("offset 2 is in the spill file") };
        assert_eq!(&read.read().unwrap()[..], b"234", "only what was written");
        assert!(matches!(log.read(5, 100).unwrap(), Found::Now(Read::Bytes(bytes)) if bytes == b"56789"[..]));
    }

    #[test]
    fn the_memory_budget_is_shared_by_every_log_and_given_back() {
        let dir = std::env::temp_dir();
        let budget = Budget::new(300);
        let path = |name: &str| dir.join(format!("runlog-test-{}-budget-{name}", std::process::id()));
        let mut a = OutputLog::new(1000, budget.clone(), path("a"));
        append(&mut a, &[b'a'; 150]).unwrap();
        assert_eq!((!a.spilled(), budget.used()), (true, 150 + CHUNK_OVERHEAD));
        let mut b = OutputLog::new(1000, budget.clone(), path("b"));
        append(&mut b, &[b'b'; 100]).unwrap();
        assert!(b.spilled(), "the budget is full: b spills");
        assert_eq!(budget.used(), 150 + CHUNK_OVERHEAD);
        assert_eq!(replay(&b, 0).0, vec![b'b'; 100]);
        drop(a);
        assert_eq!(budget.used(), 0);
        let mut c = OutputLog::new(1000, budget.clone(), path("c"));
        append(&mut c, &[b'c'; 100]).unwrap();
        assert!(!c.spilled(), "a's share came back");
        // The dropped middle's chunks are let go in memory too.
        let mut d = OutputLog::new(20, Budget::new(10_000), path("d"));
        for _ in 0..10 {
            append(&mut d, &[b'd'; 10]).unwrap();
        }
        assert_eq!((d.head_chunks.len(), d.recent.len(), d.dropped()), (1, 1, 80), "head and tail chunks only");
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
        // Some chunks in memory, then the one that passes the budget spills them all.
        check(1000, 400, &[3, 5, 100, 1, 1, 7, 33, 200, 50]);
        check(20, 400, &[3, 5, 100, 1, 1, 7, 33]);
        check(64, 300, &[10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3, 200]);
    }
}
