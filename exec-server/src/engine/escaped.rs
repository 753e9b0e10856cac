//! Descendants that left their command's process group (`setsid`, `setpgid`): found by the job tag in their
//! environment, and ended with their command by the process-group policy (SIGTERM, grace, SIGKILL).
//!
//! Every command gets `SIDECAR_EXEC_JOB=<server pid>-<job id>` in its environment, which its descendants inherit;
//! when the command's group is finished, any process still carrying that tag escaped it (see [`process_group::Tag`]
//! for what this finds and what it cannot). Finished jobs are swept in batches (one pass through `/proc` per 50 ms),
//! so short commands do not each pay for a scan. The sweeper also remembers which jobs it is still ending, so that
//! a shutdown can finish those sweeps before the process exits.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_group::{Members, Tag, Tagged};

use crate::metrics::CommandMetrics;

/// The variable that tags a command's descendants.
pub const JOB_VARIABLE: &str = "SIDECAR_EXEC_JOB";

/// The tag value for one job of this server process.
pub fn tag_value(job: u64) -> String {
    format!("{}-{job}", std::process::id())
}

/// The tag of one job.
pub fn tag(job: u64) -> Tag {
    Tag::new(JOB_VARIABLE, &tag_value(job))
}

/// How long finished jobs are collected before one look through `/proc` covers them all: reading every process's
/// environment after each short command would cost more than the command.
const BATCH: Duration = Duration::from_millis(50);

/// Collects finished jobs and, in batches, ends whatever they left outside their groups.
#[derive(Debug, Default)]
pub struct Sweeper {
    jobs: Mutex<Jobs>,
    wake: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Jobs {
    /// Finished, not yet looked at.
    pending: HashSet<u64>,
    /// Being ended now.
    sweeping: HashSet<u64>,
}

impl Sweeper {
    /// A job whose group is gone: anything still carrying its tag escaped and will be ended.
    pub fn job_finished(&self, job: u64) {
        self.jobs.lock().unwrap().pending.insert(job);
        self.wake.notify_one();
    }

    /// Finished jobs not yet looked at (those being swept have had their SIGTERM).
    pub fn pending(&self) -> Vec<u64> {
        self.jobs.lock().unwrap().pending.iter().copied().collect()
    }

    /// Jobs not yet swept or being swept: what a shutdown still has to end.
    pub fn unfinished(&self) -> Vec<u64> {
        let jobs = self.jobs.lock().unwrap();
        jobs.pending.iter().chain(&jobs.sweeping).copied().collect()
    }

    /// Runs until the runtime ends: one batch of finished jobs at a time, ended by the policy in the background.
    pub async fn run(self: Arc<Self>, grace: Duration, metrics: CommandMetrics) {
        loop {
            self.wake.notified().await;
            tokio::time::sleep(BATCH).await;
            let batch: Vec<u64> = {
                let mut jobs = self.jobs.lock().unwrap();
                let batch: Vec<u64> = jobs.pending.drain().collect();
                jobs.sweeping.extend(&batch);
                batch
            };
            let (sweeper, metrics) = (self.clone(), metrics.clone());
            tokio::spawn(async move {
                let mut escaped = Tagged::new(batch.iter().map(|job| tag(*job)).collect());
                // One pass through `/proc`; the policy's own look is cheap once it knows the pids.
                if !escaped.is_empty() {
                    let count = escaped.seen().len();
                    tracing::info!(jobs = ?batch, count, "terminating processes that left their command's group");
                    metrics.escaped_ended(count);
                    if !process_group::terminate(&mut escaped, grace).await {
                        tracing::warn!(jobs = ?batch, "tagged processes survive SIGKILL; giving up on them");
                    }
                }
                let mut jobs = sweeper.jobs.lock().unwrap();
                for job in &batch {
                    jobs.sweeping.remove(job);
                }
            });
        }
    }
}
