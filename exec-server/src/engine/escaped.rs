//! Descendants that left their command's process group (`setsid`, `setpgid`): found by the job tag in their
//! environment, and ended with their command.
//!
//! A process group cannot hold a daemon that calls `setsid`, and without cgroups nothing else ties it to the
//! command that started it. Every command therefore gets `SIDECAR_EXEC_JOB=<server pid>-<job id>` in its
//! environment, which its descendants inherit; when the command's group is finished, any process still carrying
//! that tag escaped it and is terminated the same way (SIGTERM, grace, SIGKILL). Finished jobs are swept in batches
//! (one pass through `/proc` per 50 ms), so short commands do not each pay for a scan. A descendant that scrubs
//! its environment (`env -i`) is not found: that is the limit of this approach.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// The variable that tags a command's descendants.
pub const JOB_VARIABLE: &str = "SIDECAR_EXEC_JOB";

/// The tag value for one job of this server process.
pub fn tag(job: u64) -> String {
    format!("{}-{job}", std::process::id())
}

/// Pids of processes whose environment holds `SIDECAR_EXEC_JOB=<value>`.
pub fn tagged(value: &str) -> Vec<i32> {
    let needle = format!("{JOB_VARIABLE}={value}");
    let mut pids = Vec::new();
    for_each_environ(|pid, environ| {
        if environ.split(|&b| b == 0).any(|entry| entry == needle.as_bytes()) {
            pids.push(pid);
        }
    });
    pids
}

/// How long finished jobs are collected before one look through `/proc` covers them all: reading every process's
/// environment after each short command would cost more than the command.
const BATCH: Duration = Duration::from_millis(50);

/// Collects finished jobs and, in batches, ends whatever they left outside their groups.
#[derive(Debug, Default)]
pub struct Sweeper {
    pending: std::sync::Mutex<std::collections::HashSet<u64>>,
    wake: tokio::sync::Notify,
}

impl Sweeper {
    /// A job whose group is gone: anything still carrying its tag escaped and will be ended.
    pub fn job_finished(&self, job: u64) {
        self.pending.lock().unwrap().insert(job);
        self.wake.notify_one();
    }

    /// Jobs not yet swept (for the last-resort kill at exit).
    pub fn pending(&self) -> Vec<u64> {
        self.pending.lock().unwrap().iter().copied().collect()
    }

    /// Runs until the runtime ends: one pass through `/proc` per batch of finished jobs, then SIGTERM, `grace`,
    /// SIGKILL for each job that left processes behind.
    pub async fn run(self: std::sync::Arc<Self>, grace: Duration) {
        loop {
            self.wake.notified().await;
            tokio::time::sleep(BATCH).await;
            let jobs: Vec<u64> = self.pending.lock().unwrap().drain().collect();
            let tags: Vec<String> = jobs.iter().map(|job| tag(*job)).collect();
            for value in tagged_any(&tags) {
                tokio::spawn(async move { terminate(&value, grace).await });
            }
        }
    }
}

/// The tags among `values` that some live process carries, each once.
fn tagged_any(values: &[String]) -> Vec<String> {
    if values.is_empty() {
        return Vec::new();
    }
    let needles: Vec<Vec<u8>> = values.iter().map(|value| format!("{JOB_VARIABLE}={value}").into_bytes()).collect();
    let mut found = std::collections::BTreeSet::new();
    for_each_environ(|_, environ| {
        for entry in environ.split(|&b| b == 0) {
            if let Some(index) = needles.iter().position(|needle| entry == needle.as_slice()) {
                found.insert(values[index].clone());
            }
        }
    });
    found.into_iter().collect()
}

/// Calls `visit` with the pid and environment of every other process we can read.
fn for_each_environ(mut visit: impl FnMut(i32, &[u8])) {
    let own = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for pid in entries.filter_map(Result::ok).filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok()) {
        if pid == own {
            continue;
        }
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) {
            visit(pid, &environ);
        }
    }
}

/// Ends every process tagged with `value`: SIGTERM, up to `grace`, then SIGKILL until no tagged process is left
/// (rescanning each round: an escapee may fork right up to the moment it is killed); reaps those re-parented to us.
pub async fn terminate(value: &str, grace: Duration) {
    let mut pids = tagged(value);
    if pids.is_empty() {
        return;
    }
    tracing::info!(job = value, count = pids.len(), "terminating processes that left their command's group");
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
        let _ = kill(Pid::from_raw(*pid), Signal::SIGCONT);
    }
    let deadline = tokio::time::Instant::now() + grace;
    while !pids.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
        reap(&pids);
        pids.retain(|pid| alive(*pid));
    }
    let give_up = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        reap(&pids);
        pids = tagged(value);
        if pids.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= give_up {
            tracing::warn!(job = value, left = pids.len(), "tagged processes survive SIGKILL; giving up on them");
            return;
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGKILL to every process tagged with `value` (last resort at exit).
pub fn kill_tagged(value: &str) {
    for pid in tagged(value) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Reaps those of `pids` that are our (re-parented) children and have exited. These are never tokio's children:
/// a command's leader is reaped by tokio before its job's escaped descendants are looked for.
fn reap(pids: &[i32]) {
    for pid in pids {
        let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
    }
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}
