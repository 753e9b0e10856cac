//! Helpers shared by the integration tests of every crate: markers that tag the processes a test starts, checks
//! that none survive, runs of our binaries ([`BinaryRun`]) and binaries running in the background ([`Running`]),
//! waits on events, terminals a test opens ([`Terminal`]), a proxy that breaks connections on purpose
//! ([`CutProxy`]), deterministic test data, and hostile files with a memory cap for the servers that meet them.

mod binary_run;
mod cut_proxy;
mod running;
mod terminal;

use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use binary_run::{stderr, stdout, BinaryRun, HANG};
pub use cut_proxy::CutProxy;
use process_group::procfs;
pub use running::{catches, Running};
pub use terminal::{native_on_a_pty, wait_until_reading, waits_for_input, Ended, Session, Terminal};

/// A string unique to one call in this test process, to put on a command line and look for in /proc afterwards.
/// It is also a valid number of seconds, so `sleep <marker>` is a long sleep that carries it.
pub fn marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!("{}.{:05}{:04}", 1000 + NEXT.fetch_add(1, Ordering::Relaxed), std::process::id() % 100_000, 4242)
}

/// `sleep <marker>`: a long sleep whose command line carries the marker.
pub fn sleeper(marker: &str) -> String {
    format!("sleep {marker}")
}

/// Pids of live (not zombie) processes whose command line contains `marker`.
pub fn processes_matching(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(marker) && i32::try_from(*pid).ok().and_then(procfs::stat).is_some_and(|s| !s.is_zombie())
        })
        .collect()
}

/// Pids of the live processes whose parent is `parent` (from /proc: for processes a test did not spawn itself,
/// e.g. the per-connection children of a daemon).
pub fn children_of(parent: u32) -> Vec<u32> {
    children_in_state(parent, false)
}

/// Waits until no process carries `marker`; panics naming the survivors after `within`.
pub fn assert_no_survivors(marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = processes_matching(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left behind for {marker}: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a process carries `marker` (it has started); panics after 10 s.
pub fn wait_for_process(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_matching(marker).is_empty() {
        assert!(Instant::now() < deadline, "no process with {marker} started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Deterministic pseudo-random bytes (xorshift) covering every byte value.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A command for one of our binaries with a clean environment (only PATH), no stdin, captured output, and killed if
/// the test drops it: what every test that runs a binary starts from.
pub fn isolated_command(binary: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Pids of the zombie (`<defunct>`) children of `parent`: what a parent that never reaps leaves behind.
pub fn zombie_children(parent: u32) -> Vec<u32> {
    children_in_state(parent, true)
}

/// Pids of the children of `parent` that are zombies (`zombie`), or live.
fn children_in_state(parent: u32, zombie: bool) -> Vec<u32> {
    procfs::pids()
        .into_iter()
        .filter(|pid| {
            procfs::stat(*pid)
                .is_some_and(|stat| stat.is_zombie() == zombie && u32::try_from(stat.parent) == Ok(parent))
        })
        .filter_map(|pid| u32::try_from(pid).ok())
        .collect()
}

/// Waits until `check` holds (a file appears, a process ends): panics naming `what` after 20 s, a hang guard, never
/// a timing assertion.
pub fn wait_until(what: &str, check: impl FnMut() -> bool) {
    assert!(eventually(Duration::from_secs(20), check), "still waiting for {what}");
}

/// Polls `done` every 20 ms until it holds or `within` has passed; returns whether it held. For conditions that
/// have no event to wait on (a process that is not ours changing state).
pub fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Creates a FIFO at `path`: what a hostile peer leaves where a file is expected.
pub fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The address-space cap of [`memory_capped`]: far above what one of our servers needs (its threads' stacks and
/// allocator arenas are reserved, not used), far below what reading /dev/zero or a 10 GiB file asks for.
pub const MEMORY_CAP_KIB: u64 = 2 * 1024 * 1024;

/// The argv that runs `binary` (with the arguments appended after it) with its address space capped at
/// [`MEMORY_CAP_KIB`]: for tests that feed a server what would make a broken build read without end, so that it
/// fails on its own instead of taking the machine's memory.
pub fn memory_capped(binary: &str) -> [String; 4] {
    let script = format!("ulimit -v {MEMORY_CAP_KIB} && exec \"$0\" \"$@\"");
    ["sh".to_owned(), "-c".to_owned(), script, binary.to_owned()]
}

/// The argv that runs `binary` (with the arguments appended after it) where inotify cannot be had, as on a node
/// whose inotify instances are all used up: in a user namespace of its own (`unshare --user --map-root-user`, which
/// needs user namespaces) whose inotify instances are capped at 0. For the polling fallback of the programs that
/// watch the IPC folders. `unshare` and `sh` exec the binary, so the process started is the binary itself.
pub fn without_inotify(binary: &str) -> [String; 7] {
    let script = "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\"";
    ["unshare", "--user", "--map-root-user", "sh", "-c", script, binary].map(str::to_owned)
}

/// The peak resident memory (VmHWM) of process `pid` so far, in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}
