//! Descendants that left their command's process group (`setsid`, `setpgid`): found by the job tag in their
//! environment, and ended with their command by the process-group policy (SIGTERM, grace, SIGKILL), unless they are
//! a daemon the server keeps (see [`super::daemons`]).
//!
//! Every command gets `SIDECAR_EXEC_JOB=<server pid>-<job id>` in its environment, which its descendants inherit;
//! when the command's group is finished, any process still carrying that tag escaped it (see [`process_group::Tag`]
//! for what this finds and what it cannot). Finished jobs are swept in batches (one pass through `/proc` per 50 ms),
//! so short commands do not each pay for a scan. The sweeper also remembers which jobs it is still ending, so that
//! a shutdown can finish those sweeps before the process exits, and it ends kept daemons when `--daemon-idle` or
//! `--max-daemons` says so.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_group::{Members, Tag, Tagged};

use super::daemons::{Daemons, Finished, KeptSession};
use crate::metrics::{CommandMetrics, DaemonEnd};

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

/// How often kept daemons are looked at (gone by themselves? idle?) at most: the idle limit is hours, and a look is
/// a pass through `/proc`.
const KEPT_LOOK: Duration = Duration::from_secs(10);

/// Collects finished jobs and, in batches, ends whatever they left outside their groups.
#[derive(Debug)]
pub struct Sweeper {
    jobs: Mutex<Jobs>,
    wake: tokio::sync::Notify,
    /// A session was kept: the loop's next look at the kept ones is due.
    kept_changed: tokio::sync::Notify,
    daemons: Daemons,
}

#[derive(Debug, Default)]
struct Jobs {
    /// Finished, not yet looked at.
    pending: HashMap<u64, Finished>,
    /// Being ended now.
    sweeping: HashSet<u64>,
    /// Kept sessions being ended now (shutdown, idle, max): their jobs and sessions.
    ending: Vec<KeptSession>,
}

impl Sweeper {
    pub fn new(daemons: Daemons) -> Self {
        Sweeper {
            jobs: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            kept_changed: tokio::sync::Notify::new(),
            daemons,
        }
    }

    pub fn daemons(&self) -> &Daemons {
        &self.daemons
    }

    /// A job whose group is gone: anything still carrying its tag escaped, and is ended unless it is a daemon kept.
    pub fn job_finished(&self, finished: Finished) {
        self.jobs.lock().unwrap().pending.insert(finished.job, finished);
        self.wake.notify_one();
    }

    /// Finished jobs not yet looked at (those being swept have had their SIGTERM).
    pub fn pending(&self) -> Vec<u64> {
        self.jobs.lock().unwrap().pending.keys().copied().collect()
    }

    /// What a shutdown still has to end: whatever carries the tag of a job not yet swept or being swept, and the
    /// kept sessions being ended.
    pub fn unfinished(&self) -> (Vec<u64>, Vec<i32>) {
        let jobs = self.jobs.lock().unwrap();
        let mut tags: Vec<u64> = jobs.pending.keys().chain(&jobs.sweeping).copied().collect();
        tags.extend(jobs.ending.iter().map(|kept| kept.job));
        (tags, jobs.ending.iter().map(|kept| kept.session).collect())
    }

    /// The shutdown: every kept session is to be ended (returned: its jobs' tags and its sessions, to be asked to stop
    /// now), and none is kept from now on.
    pub fn end_every_daemon(&self) -> (Vec<u64>, Vec<i32>) {
        let kept = self.daemons.take_all(true);
        self.daemons.ending(&kept, DaemonEnd::Shutdown);
        let found = (kept.iter().map(|k| k.job).collect(), kept.iter().map(|k| k.session).collect());
        self.jobs.lock().unwrap().ending.extend(kept);
        found
    }

    /// Runs until the runtime ends: one batch of finished jobs at a time, ended by the policy in the background; and
    /// the kept daemons looked at every [`KEPT_LOOK`] (or at their idle deadline, if sooner).
    pub async fn run(self: Arc<Self>, grace: Duration, metrics: CommandMetrics) {
        loop {
            let look_at_kept = (!self.daemons.is_empty()).then(|| {
                let next = tokio::time::Instant::now() + KEPT_LOOK;
                self.daemons.idle_deadline().map_or(next, |at| next.min(at.into()))
            });
            tokio::select! {
                () = self.wake.notified() => {}
                () = self.kept_changed.notified() => continue,
                () = sleep_until(look_at_kept) => {
                    self.look_at_kept(grace);
                    continue;
                }
            }
            tokio::time::sleep(BATCH).await;
            let batch: Vec<Finished> = {
                let mut jobs = self.jobs.lock().unwrap();
                let batch: Vec<Finished> = jobs.pending.drain().map(|(_, finished)| finished).collect();
                jobs.sweeping.extend(batch.iter().map(|finished| finished.job));
                batch
            };
            let (sweeper, metrics) = (self.clone(), metrics.clone());
            tokio::spawn(async move {
                sweeper.sweep(&batch, grace, &metrics).await;
                let mut jobs = sweeper.jobs.lock().unwrap();
                for finished in &batch {
                    jobs.sweeping.remove(&finished.job);
                }
            });
        }
    }

    /// One batch: the daemons it left are kept (pushing the oldest out beyond `--max-daemons`), the rest is ended.
    /// One pass through `/proc` finds what every job of the batch left; a second one only when something is to be
    /// ended (the policy's own looks are cheap once it knows the pids).
    async fn sweep(self: &Arc<Self>, batch: &[Finished], grace: Duration, metrics: &CommandMetrics) {
        self.daemons.prune();
        let jobs: Vec<u64> = batch.iter().map(|finished| finished.job).collect();
        let tags = || jobs.iter().map(|job| tag(*job)).collect();
        let found = Tagged::new(tags()).outside_sessions(self.daemons.sessions()).find_by_tag();
        let mut kept = Vec::new();
        for (finished, escaped) in batch.iter().zip(&found) {
            if !escaped.is_empty() {
                kept.extend(self.daemons.recognise(finished, escaped));
            }
        }
        // A kept session's tagged pids are exactly the found ones in it; whatever else was found is to be ended.
        let kept_pids: HashSet<i32> = kept.iter().flat_map(|session| session.pids.iter().copied()).collect();
        let to_end = found.iter().flatten().any(|pid| !kept_pids.contains(pid));
        let keeping = !kept.is_empty();
        let evicted = self.daemons.keep(kept);
        if keeping {
            self.kept_changed.notify_one();
        }
        if !evicted.is_empty() {
            self.daemons.ending(&evicted, DaemonEnd::MaxDaemons);
            self.end_sessions(evicted, grace);
        }
        // Nothing found outside the kept sessions: nothing to end (a tagged process descends from a tagged one, and
        // none was left).
        if !to_end {
            return;
        }
        let mut escaped = Tagged::new(tags()).outside_sessions(self.daemons.sessions());
        if !escaped.is_empty() {
            let count = escaped.seen().len();
            tracing::info!(?jobs, count, "terminating processes that left their command's group");
            metrics.escaped_ended(count);
            if !process_group::term_then_kill(&mut escaped, grace).await {
                tracing::warn!(?jobs, "tagged processes survive SIGKILL; giving up on them");
            }
        }
    }

    /// The kept daemons, every [`KEPT_LOOK`]: those gone by themselves are forgotten; all are ended once no command
    /// has run for `--daemon-idle`.
    fn look_at_kept(self: &Arc<Self>, grace: Duration) {
        self.daemons.prune();
        if self.daemons.idle_deadline().is_some_and(|at| at <= std::time::Instant::now()) {
            let idle = self.daemons.take_all(false);
            self.daemons.ending(&idle, DaemonEnd::DaemonIdle);
            self.end_sessions(idle, grace);
        }
    }

    /// Ends kept sessions by the policy, in the background: each one's members, and what carries its job's tag
    /// outside the sessions still kept.
    fn end_sessions(self: &Arc<Self>, sessions: Vec<KeptSession>, grace: Duration) {
        if sessions.is_empty() {
            return;
        }
        self.jobs.lock().unwrap().ending.extend(sessions.iter().cloned());
        let sweeper = self.clone();
        tokio::spawn(async move {
            let tags = sessions.iter().map(|kept| tag(kept.job)).collect();
            let ids: Vec<i32> = sessions.iter().map(|kept| kept.session).collect();
            let mut members = Tagged::new(tags).with_sessions(ids.clone()).outside_sessions(sweeper.daemons.sessions());
            if !process_group::term_then_kill(&mut members, grace).await {
                tracing::warn!(sessions = ?ids, "kept daemons survive SIGKILL; giving up on them");
            }
            sweeper.jobs.lock().unwrap().ending.retain(|kept| !ids.contains(&kept.session));
        });
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
