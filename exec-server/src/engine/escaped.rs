//! Descendants that left their command's process group (`setsid`, `setpgid`): found by the job tag in their
//! environment, and ended with their command.
//!
//! A process group cannot hold a daemon that calls `setsid`, and without cgroups nothing else ties it to the
//! command that started it. Every command therefore gets `SIDECAR_EXEC_JOB=<server pid>-<job id>` in its
//! environment, which its descendants inherit; when the command's group is finished, any process still carrying
//! that tag escaped it and is terminated the same way (SIGTERM, grace, SIGKILL). A descendant that scrubs its
//! environment (`env -i`) is not found: that is the limit of this approach.

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
    let own = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
            environ.split(|&b| b == 0).any(|entry| entry == needle.as_bytes())
        })
        .collect()
}

/// Whether any process could have escaped a finished group. Once a group is gone, every descendant that left it
/// has lost its parent and, with us as child subreaper, has been re-parented to us. So when we are subreaper and
/// have no children but the leaders of running commands (`leaders`), nothing escaped and the costly scan of every
/// process's environment is skipped. Without subreaper (or without /proc/…/children) the scan always runs.
pub fn may_have_escaped(leaders: &[i32]) -> bool {
    if !matches!(nix::sys::prctl::get_child_subreaper(), Ok(true)) {
        return true;
    }
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else { return true };
    for thread in threads.filter_map(Result::ok) {
        let Ok(children) = std::fs::read_to_string(thread.path().join("children")) else { return true };
        if children.split_whitespace().filter_map(|pid| pid.parse::<i32>().ok()).any(|pid| !leaders.contains(&pid)) {
            return true;
        }
    }
    false
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
