//! Which ended runs are forgotten, and when: after `--retain`, or sooner, oldest ended first, when `--max-runs`
//! runs are kept and a new one needs the room (that one leaves a tombstone, see `tombstone`). A running run is never
//! forgotten here (DELETE stops it first).
//!
//! Every request naming a run asks both questions, so neither may cost a look at every kept run: the runs are
//! indexed by when they ended, and only the runs not yet seen ended are looked at (a few: those running). With
//! `--max-runs` runs kept, a full scan per request was ~6% of the server's CPU for a forwarded `true`
//! (BENCHMARKS.md, "P1: where a forwarded call's time goes").

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RunId;

use super::named_run::NamedRun;

/// The kept runs, by id and by when they ended.
#[derive(Debug, Default)]
pub struct KeptRuns {
    by_id: HashMap<RunId, Kept>,
    /// Runs not yet seen ended: looked at again before each question.
    unseen_end: HashSet<RunId>,
    /// Ended runs, oldest first.
    by_end: BTreeSet<(Instant, RunId)>,
}

#[derive(Debug)]
struct Kept {
    run: Arc<NamedRun>,
    /// When the run ended, once this index has seen it (its key in `by_end`).
    ended: Option<Instant>,
}

impl KeptRuns {
    pub fn get(&self, id: &RunId) -> Option<&Arc<NamedRun>> {
        self.by_id.get(id).map(|kept| &kept.run)
    }

    pub fn insert(&mut self, id: RunId, run: Arc<NamedRun>) {
        self.remove(&id);
        self.unseen_end.insert(id.clone());
        self.by_id.insert(id, Kept { run, ended: None });
    }

    pub fn remove(&mut self, id: &RunId) -> Option<Arc<NamedRun>> {
        let kept = self.by_id.remove(id)?;
        match kept.ended {
            Some(ended) => self.by_end.remove(&(ended, id.clone())),
            None => self.unseen_end.remove(id),
        };
        Some(kept.run)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn clear(&mut self) {
        *self = KeptRuns::default();
    }

    pub fn runs(&self) -> impl Iterator<Item = &Arc<NamedRun>> {
        self.by_id.values().map(|kept| &kept.run)
    }

    /// Forgets every run that ended more than `retain` before `now`; returns how many.
    pub fn forget_expired(&mut self, retain: Duration, now: Instant) -> usize {
        self.see_ends();
        let mut forgotten = 0;
        while let Some((ended, id)) = self.by_end.first().cloned() {
            if now.saturating_duration_since(ended) < retain {
                break;
            }
            self.remove(&id);
            forgotten += 1;
        }
        forgotten
    }

    /// Makes room for one more run under `max_runs` by forgetting the runs that ended first, each handed to
    /// `forgotten` (which leaves its tombstone). `false`: every kept run is still running.
    pub fn make_room(&mut self, max_runs: usize, mut forgotten: impl FnMut(&NamedRun)) -> bool {
        if self.by_id.len() < max_runs {
            return true;
        }
        self.see_ends();
        while self.by_id.len() >= max_runs {
            let Some((_, id)) = self.by_end.first().cloned() else { return false };
            if let Some(run) = self.remove(&id) {
                forgotten(&run);
            }
        }
        true
    }

    /// Moves the runs that ended since the last look into the index by end.
    fn see_ends(&mut self) {
        let by_id = &mut self.by_id;
        let by_end = &mut self.by_end;
        self.unseen_end.retain(|id| {
            let Some(kept) = by_id.get_mut(id) else { return false };
            let Some(ended) = kept.run.ended_at() else { return true };
            kept.ended = Some(ended);
            by_end.insert((ended, id.clone()));
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::kept_argv::KeptArgv;
    use super::super::log::{Budget, StreamLog};
    use super::*;
    use crate::ending::Ending;

    fn run(id: &str) -> (RunId, Arc<NamedRun>) {
        let id = RunId::new(id).unwrap();
        let log = || StreamLog::new(1024, Budget::new(1 << 20), std::env::temp_dir().join("never-written"));
        let run = NamedRun::new(id.clone(), KeptArgv::new(&["true".into()], Path::new("/")), "/".into(), log(), log());
        (id, Arc::new(run))
    }

    fn kept(runs: &KeptRuns) -> Vec<String> {
        let mut ids: Vec<String> = runs.runs().map(|run| run.id.to_string()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn the_run_that_ended_first_gives_way_first_whatever_order_they_came_in() {
        let mut runs = KeptRuns::default();
        let ids: Vec<_> = ["a-run", "b-run", "c-run"].into_iter().map(run).collect();
        for (id, run) in &ids {
            runs.insert(id.clone(), run.clone());
        }
        // b ends first, then a; c still runs.
        ids[1].1.finish(Ending::never_ran("b".into()));
        // Two ends in the same nanosecond would be ordered by id (a first): make b's strictly earlier.
        while Instant::now() <= ids[1].1.ended_at().unwrap() {}
        ids[0].1.finish(Ending::never_ran("a".into()));
        let mut forgotten = Vec::new();
        assert!(runs.make_room(3, |run| forgotten.push(run.id.to_string())));
        assert_eq!(forgotten, ["b-run"]);
        assert!(runs.make_room(2, |run| forgotten.push(run.id.to_string())));
        assert_eq!(forgotten, ["b-run", "a-run"]);
        assert!(!runs.make_room(1, |_| panic!("a running run is never forgotten")), "only c is left, running");
        assert_eq!(kept(&runs), ["c-run"]);
    }

    #[test]
    fn expiry_forgets_the_runs_ended_longer_ago_than_retain_and_never_a_running_one() {
        let mut runs = KeptRuns::default();
        let (ended, running) = (run("ended-run"), run("running-run"));
        runs.insert(ended.0.clone(), ended.1.clone());
        runs.insert(running.0.clone(), running.1.clone());
        ended.1.finish(Ending::never_ran("done".into()));
        let now = Instant::now();
        assert_eq!(runs.forget_expired(Duration::from_secs(60), now), 0, "not yet due");
        assert_eq!(runs.forget_expired(Duration::from_secs(60), now + Duration::from_secs(61)), 1);
        assert_eq!(kept(&runs), ["running-run"]);
        assert_eq!(runs.forget_expired(Duration::ZERO, now + Duration::from_secs(3600)), 0);
        // Removing a run by id takes it out of both indexes: a later look does not find it again.
        running.1.finish(Ending::never_ran("done too".into()));
        assert!(runs.remove(&running.0).is_some());
        assert_eq!(runs.forget_expired(Duration::ZERO, now + Duration::from_secs(3600)), 0);
        assert_eq!(runs.len(), 0);
    }
}
