//! Which ended runs are forgotten, and when: after `--retain`, or sooner, oldest ended first, when `--max-runs`
//! runs are kept and a new one needs the room (that one leaves a tombstone, see `tombstone`). A running run is never
//! forgotten here (DELETE stops it first).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use protocol::RunId;

use super::named_run::NamedRun;

/// Forgets every run that ended more than `retain` ago; returns how many.
pub fn forget_expired(runs: &mut HashMap<RunId, Arc<NamedRun>>, retain: Duration, now: Instant) -> usize {
    let before = runs.len();
    runs.retain(|_, run| run.ended_at().is_none_or(|ended| now.saturating_duration_since(ended) < retain));
    before - runs.len()
}

/// Makes room for one more run under `max_runs` by forgetting the runs that ended first, each handed to
/// `forgotten` (which leaves its tombstone). `false`: every kept run is still running.
pub fn make_room(
    runs: &mut HashMap<RunId, Arc<NamedRun>>,
    max_runs: usize,
    mut forgotten: impl FnMut(&NamedRun),
) -> bool {
    while runs.len() >= max_runs {
        let oldest = runs
            .iter()
            .filter_map(|(id, run)| run.ended_at().map(|ended| (ended, id.clone())))
            .min_by_key(|(ended, _)| *ended);
        match oldest {
            Some((_, id)) => {
                if let Some(run) = runs.remove(&id) {
                    forgotten(&run);
                }
            }
            None => return false,
        }
    }
    true
}
