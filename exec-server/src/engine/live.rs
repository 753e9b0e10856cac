//! The engine's live set and its shutdown: every process group not yet cleaned up, the guard that keeps a group in
//! the set (and SIGKILLs it if its run is abandoned), and the shutdown that stops them all by the policy.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use process_group::{self as group, Members, Pgid, Tagged};

use super::{escaped, ProcessEngine};

/// How long [`ProcessEngine::finish_shutdown`] waits for SIGKILLed processes to disappear: short, since the whole
/// shutdown must fit in the grace period plus a second.
pub const SHUTDOWN_KILL_WAIT: Duration = Duration::from_millis(400);

impl ProcessEngine {
    /// How many process groups are alive (running commands and leftovers being terminated).
    pub fn live_groups(&self) -> usize {
        self.inner.live_groups.lock().unwrap().len()
    }

    /// Stops every running command by the policy, and refuses none: transports stop accepting work themselves.
    /// Escapees of running commands and of finished jobs not yet swept get their SIGTERM now too, so that one grace
    /// period, counted from here, covers everything; [`ProcessEngine::finish_shutdown`] completes the policy. Each process
    /// gets one SIGTERM: members of a live group get theirs from their command's own termination, and escapees
    /// being swept already had theirs.
    pub fn shutdown(&self) {
        let _ = self.inner.shutdown_at.set(tokio::time::Instant::now());
        self.inner.shutdown.cancel();
        let (groups, mut jobs): (Vec<i32>, Vec<u64>) = {
            let live = self.inner.live_groups.lock().unwrap();
            (live.keys().map(|pgid| pgid.get()).collect(), live.values().copied().collect())
        };
        jobs.extend(self.inner.sweeper.pending());
        // Kept daemons end with the commands, within the same grace.
        let (daemon_jobs, sessions) = self.inner.sweeper.end_every_daemon();
        jobs.extend(daemon_jobs);
        let mut escapees =
            Tagged::new(jobs.into_iter().map(escaped::tag).collect()).with_sessions(sessions).outside_groups(groups);
        group::ask_to_stop(&mut escapees);
    }

    /// How many daemons (sessions commands left behind) the server keeps now.
    pub fn daemons_kept(&self) -> usize {
        self.inner.sweeper.daemons().len()
    }

    /// Completes the shutdown before the process exits: waits until the grace period that [`ProcessEngine::shutdown`]
    /// started has passed for whatever still carries the tag of an unfinished job (commands, what escaped them,
    /// sweeps under way), SIGKILLs what is left, and gives up on what survives SIGKILL for [`SHUTDOWN_KILL_WAIT`].
    /// Returns within the grace period plus that wait, counted from [`ProcessEngine::shutdown`].
    pub async fn finish_shutdown(&self) {
        let started = *self.inner.shutdown_at.get_or_init(tokio::time::Instant::now);
        let mut unfinished = self.unfinished();
        if !group::wait_then_kill(&mut unfinished, started + self.inner.policy.grace, SHUTDOWN_KILL_WAIT).await {
            tracing::warn!(left = unfinished.find().len(), "processes survive SIGKILL at shutdown; leaving them");
        }
        self.kill_all();
    }

    /// Last resort when the process is about to exit: SIGKILL to every group and tagged process still known.
    pub fn kill_all(&self) {
        for pgid in self.inner.live_groups.lock().unwrap().keys() {
            pgid.signal(Signal::SIGKILL);
        }
        self.unfinished().signal(Signal::SIGKILL);
    }

    /// Whatever carries the tag of a job that is running, or finished but not yet swept, and the kept daemons being
    /// ended.
    fn unfinished(&self) -> Tagged {
        let mut jobs: Vec<u64> = self.inner.live_groups.lock().unwrap().values().copied().collect();
        let (swept, sessions) = self.inner.sweeper.unfinished();
        jobs.extend(swept);
        Tagged::new(jobs.into_iter().map(escaped::tag).collect()).with_sessions(sessions)
    }
}

/// A command counted as running for `--daemon-idle` until dropped (also when its run is abandoned).
pub(super) struct Active(Arc<escaped::Sweeper>);

impl Active {
    pub(super) fn new(sweeper: &Arc<escaped::Sweeper>) -> Self {
        sweeper.daemons().command_started();
        Active(sweeper.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.daemons().command_ended();
    }
}

/// Keeps a process group in the engine's live set until its members are gone; if the run is abandoned before
/// that (its task dropped at runtime shutdown), SIGKILLs the group so nothing outlives us unnoticed.
pub(super) struct GroupGuard {
    pub(super) engine: ProcessEngine,
    pgid: Pgid,
    released: bool,
}

impl GroupGuard {
    pub(super) fn register(engine: ProcessEngine, pgid: Pgid, job: u64) -> Self {
        engine.inner.live_groups.lock().unwrap().insert(pgid, job);
        GroupGuard { engine, pgid, released: false }
    }

    pub(super) fn release(mut self) {
        self.released = true;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.released {
            self.pgid.signal(Signal::SIGKILL);
        }
        self.engine.inner.live_groups.lock().unwrap().remove(&self.pgid);
    }
}
