//! Prompts still in flight: requests in `prompts/` without their result. `/ipc/done` must not appear while one is
//! pending, or the agent stops mid-call and the answer is lost from the run's record.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::changes::Changes;
use crate::ipc::{self, Ipc};

/// Ids of `request-{id}.json` files that have no `result-{id}.json`.
pub fn unanswered(ipc: &Ipc) -> Vec<String> {
    let names = ipc::file_names(&ipc.prompts());
    let answered: HashSet<&str> = names.iter().filter_map(|name| ipc::result_id(name)).collect();
    names
        .iter()
        .filter_map(|name| ipc::request_id(name))
        .filter(|id| !answered.contains(id))
        .map(str::to_owned)
        .collect()
}

/// Waits until every request has its result, for at most `limit`, saying on stderr that it waits (and for what)
/// when it has to. Returns the ids still unanswered then.
pub async fn wait_answered(ipc: &Ipc, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let pending = unanswered(ipc);
    if pending.is_empty() {
        return Vec::new();
    }
    eprintln!(
        "sidecar-ipc: before ending the run, waiting up to {}s for prompts still unanswered: {}",
        limit.as_secs_f64(),
        pending.join(", ")
    );
    let mut changes = Changes::watch(&[ipc.prompts()]);
    loop {
        let pending = unanswered(ipc);
        if pending.is_empty() || Instant::now() >= deadline {
            return pending;
        }
        changes.wait(Some(deadline)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_in_flight_until_its_result_exists() {
        let dir = tempfile::tempdir().unwrap();
        let ipc = Ipc::new(dir.path().to_path_buf());
        ipc.ensure_dirs().unwrap();
        std::fs::write(ipc.request("1"), "{}").unwrap();
        std::fs::write(ipc.request("2"), "{}").unwrap();
        std::fs::write(ipc.result("1"), "{}").unwrap();
        std::fs::write(ipc.prompts().join(".request-3.json.9.tmp"), "").unwrap();
        assert_eq!(unanswered(&ipc), ["2"]);
    }
}
