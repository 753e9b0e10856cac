//! Which ended runs are forgotten, and when: after `--retain`, or sooner, oldest ended first, when `--max-runs`
//! runs are kept and a new one needs the room (that one leaves a tombstone, see `tombstone`). A running run is never
//! forgotten here (DELETE stops it first).
//!
//! Every request naming a run asks both questions, so neither may cost a look at every kept run: the runs are
//! indexed by when they ended, and only the runs not yet seen ended are looked at (a few: those running). With
//! `--max-runs` runs kept, a full scan per request was a measurable part of the server's CPU for a forwarded `true`
//! (BENCHMARKS.md, "P1: where a forwarded call's time goes").

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RunId;

use super::named_run::NamedRun;

/// Ids in the order their runs ended, oldest first: the next to expire or to give way. The kept runs' and the
/// tombstones' (`tombstone`) order, both asked on every request naming a run.
#[derive(Debug, Default)]
pub struct ByEnd(BTreeSet<(Instant, RunId)>);

impl ByEnd {
    pub fn insert(&mut self, ended: Instant, id: RunId) {
        self.0.insert((ended, id));
    }

    pub fn remove(&mut self, ended: Instant, id: &RunId) {
        self.0.remove(&(ended, id.clone()));
    }

    /// The id of the run that ended first, taken out.
    pub fn pop_oldest(&mut self) -> Option<RunId> {
        self.0.pop_first().map(|(_, id)| id)
    }

    /// The id of the run that ended first, taken out if it ended `retain` or more before `now`.
    pub fn pop_expired(&mut self, retain: Duration, now: Instant) -> Option<RunId> {
        let (ended, _) = self.0.first()?;
        (now.saturating_duration_since(*ended) >= retain).then(|| self.pop_oldest()).flatten()
    }
}

/// The kept runs, by id and by when they ended.
#[derive(Debug, Default)]
pub struct KeptRuns {
    by_id: HashMap<RunId, Arc<NamedRun>>,
    /// Runs not yet seen ended: looked at again before each question.
    unseen_end: HashSet<RunId>,
    /// The runs seen ended.
    by_end: ByEnd,
}

impl KeptRuns {
    pub fn get(&self, id: &RunId) -> Option<&Arc<NamedRun>> {
        self.by_id.get(id)
    }

    pub fn insert(&mut self, id: RunId, run: Arc<NamedRun>) {
        self.remove(&id);
        self.unseen_end.insert(id.clone());
        self.by_id.insert(id, run);
    }

    pub fn remove(&mut self, id: &RunId) -> Option<Arc<NamedRun>> {
        let run = self.by_id.remove(id)?;
        // Seen ended, it is in the order by end under the time it ended (set once).
        if let (false, Some(ended)) = (self.unseen_end.remove(id), run.ended_at()) {
            self.by_end.remove(ended, id);
        }
        Some(run)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn clear(&mut self) {
        *self = KeptRuns::default();
    }

    pub fn runs(&self) -> impl Iterator<Item = &Arc<NamedRun>> {
        self.by_id.values()
    }

    /// Forgets every run that ended more than `retain` before `now`; returns how many.
    pub fn forget_expired(&mut self, retain: Duration, now: Instant) -> usize {
        self.see_ends();
        let mut forgotten = 0;
        while let Some(id) = self.by_end.pop_expired(retain, now) {
            self.by_id.remove(&id);
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
            let Some(id) = self.by_end.pop_oldest() else { return false };
            if let Some(run) = self.by_id.remove(&id) {
                forgotten(&run);
            }
        }
        true
    }

    /// Moves the runs that ended since the last look into the order by end.
    fn see_ends(&mut self) {
        let (by_id, by_end) = (&self.by_id, &mut self.by_end);
        self.unseen_end.retain(|id| match by_id.get(id).and_then(|run| run.ended_at()) {
            Some(ended) => {
                by_end.insert(ended, id.clone());
                false
            }
            None => by_id.contains_key(id),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::kept_argv::KeptArgv;
    use super::super::log::{Budget, OutputLog};
    use super::*;
    use crate::ending::Ending;

    fn run(id: &str) -> (RunId, Arc<NamedRun>) {
        let id = RunId::new(id).unwrap();
        let log = || OutputLog::new(1024, Budget::new(1 << 20), std::env::temp_dir().join("never-written"));
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
