//! What is left of an ended run forgotten to make room under `--max-runs` before its `--retain` was up: its id, how
//! it ended and a digest of its command. A client reconnecting for the result of a run that ended while it was away
//! is told that it ended and how, never that it is unknown (which reads as "run it again": wrong, and dangerous for a
//! publish or a deploy), and a re-POST of the id starts nothing until the run's retention would have ended.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use protocol::{RunId, RunState};

use super::kept_argv::command_digest;
use super::named_run::NamedRun;
use super::retention::ByEnd;

/// Tombstones kept per `--max-runs` at most (about 200 bytes each, the id included); beyond that the oldest go
/// first (their id then reads as unknown, as after `--retain`).
const PER_KEPT_RUN: usize = 8;

/// One forgotten run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub state: RunState,
    pub exit_code: i32,
    pub signal: Option<i32>,
    ended_at: Instant,
    /// [`command_digest`] of its argv and cwd: a re-POST of another command under the id is a conflict.
    command: u64,
}

impl Tombstone {
    /// Whether `argv` in `cwd` is the command this run ran (a digest: a collision turns a 409 into a 410, both
    /// refusals).
    pub fn is_of(&self, argv: &[String], cwd: &Path) -> bool {
        self.command == command_digest(argv, cwd)
    }

    /// How it ended, for messages: `exited with exit code 0`, `timed out`, `was cancelled (exit code 143)`.
    pub fn how_it_ended(&self) -> String {
        match self.state {
            RunState::Exited => match self.signal {
                Some(signal) => format!("exited, killed by signal {signal} (exit code {})", self.exit_code),
                None => format!("exited with exit code {}", self.exit_code),
            },
            RunState::TimedOut => format!("timed out (exit code {})", self.exit_code),
            RunState::Cancelled => format!("was cancelled (exit code {})", self.exit_code),
            RunState::Running => "is running".into(),
        }
    }
}

/// The tombstones of a registry, bounded by count and by `--retain`.
#[derive(Debug)]
pub struct Tombstones {
    by_id: HashMap<RunId, Tombstone>,
    /// The same tombstones by when their run ended.
    by_end: ByEnd,
    cap: usize,
}

impl Tombstones {
    pub fn new(max_runs: usize) -> Self {
        Tombstones {
            by_id: HashMap::new(),
            by_end: ByEnd::default(),
            cap: max_runs.saturating_mul(PER_KEPT_RUN).max(PER_KEPT_RUN),
        }
    }

    /// Leaves a tombstone for `run`, an ended run being forgotten for room.
    pub fn bury(&mut self, run: &NamedRun) {
        let (Some(end), Some(ended_at)) = (run.end(), run.ended_at()) else { return };
        self.remove(&run.id);
        while self.by_id.len() >= self.cap {
            let Some(oldest) = self.by_end.pop_oldest() else { break };
            self.by_id.remove(&oldest);
        }
        let stone = Tombstone {
            state: end.state,
            exit_code: end.exit_code,
            signal: end.signal,
            ended_at,
            command: run.command.digest(),
        };
        self.by_end.insert(ended_at, run.id.clone());
        self.by_id.insert(run.id.clone(), stone);
    }

    /// Forgets the tombstones of runs that ended more than `retain` ago: their id is free, as a kept run's is then.
    /// Oldest first, from the index by end: a request's look costs nothing when none is due.
    pub fn expire(&mut self, retain: Duration, now: Instant) {
        while let Some(id) = self.by_end.pop_expired(retain, now) {
            self.by_id.remove(&id);
        }
    }

    fn remove(&mut self, id: &RunId) {
        if let Some(stone) = self.by_id.remove(id) {
            self.by_end.remove(stone.ended_at, id);
        }
    }

    pub fn get(&self, id: &RunId) -> Option<&Tombstone> {
        self.by_id.get(id)
    }
}
