//! Request ids: unique across processes, and sorting by creation time, since the agent-runner reads its folder in
//! name order and so answers requests in the order of their ids.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `{nanoseconds since 1970, 20 digits}-{pid}-{counter}`: the timestamp orders ids, the pid and the counter keep two
/// writers in the same nanosecond apart.
pub fn new_id() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_nanos()).unwrap_or_default();
    format!("{nanos:020}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_sort_by_time() {
        let first = new_id();
        let second = new_id();
        assert_ne!(first, second);
        assert!(first < second, "{first} < {second}");
        assert!(first.chars().all(|c| c.is_ascii_digit() || c == '-'));
    }
}
