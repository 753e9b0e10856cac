//! The accept loop: each connection is served by its own task (see `connection`), at most `--max-connections` at
//! once. At the cap, a new connection closes the one unused for longest (no request in flight: idle between
//! requests, or still sending its head), so idle and slow connections can never lock clients out; only when every
//! connection has a request in flight is the new one refused, with 503 and `Retry-After: 1`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::Router;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::activity::{Activity, Timeouts};
use super::connection::{self, CONNECTION};
use super::refusal::ServerRefusal;
use super::socket::{Accepted, Listener};
use crate::metrics::HttpMetrics;

/// Connections being refused at once (each for at most a second); beyond that a refused connection is closed
/// without a reply, so refusing can never use more than a few descriptors.
const MAX_REFUSING: usize = 32;
/// The pause after an accept error that is not about the one connection (no descriptor left, no memory): a new
/// attempt at once would only fail again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);

/// What the accept loop enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub timeouts: Timeouts,
}

/// Serves `router` on every one of `listeners` until `stop`; then stops accepting, lets every connection finish its request in
/// flight, and returns once all are closed (the caller aborts this when they take too long, which closes them).
pub async fn serve(
    listeners: Vec<Listener>,
    router: Router,
    limits: Limits,
    metrics: HttpMetrics,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let open_connections =
        Arc::new(OpenConnections { cap: limits.max_connections, open: Mutex::default(), next: AtomicU64::new(0) });
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            accepted = Listener::accept_any(&listeners) => match accepted {
                Ok(stream) => match open_connections.admit() {
                    Some(slot) => {
                        let (router, stop, metrics) = (router.clone(), stop.clone(), metrics.clone());
                        connections.spawn(async move {
                            let activity = slot.activity.clone();
                            connection::serve(stream, router, activity, limits.timeouts, &metrics, stop).await;
                            drop(slot);
                        });
                    }
                    None => {
                        metrics.request(CONNECTION, 503);
                        refuse(stream, &refusing, &mut connections, limits.max_connections);
                    }
                },
                Err(err) if is_about_the_connection(&err) => {}
                Err(err) => {
                    tracing::error!("cannot accept connections: {err}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listeners);
    while connections.join_next().await.is_some() {}
    Ok(())
}

fn is_about_the_connection(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(err.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset)
}

/// Answers a connection the cap has no room for with 503, or closes it at once when many are being answered.
fn refuse(stream: Accepted, refusing: &Arc<Semaphore>, tasks: &mut JoinSet<()>, cap: usize) {
    let Ok(permit) = refusing.clone().try_acquire_owned() else { return };
    tracing::warn!(cap, "connection refused: every open connection has a request in flight");
    let reply = ServerRefusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "too many open connections (limit {cap}, set by --max-connections), each with a request in flight; \
             retry shortly"
        ),
    );
    tasks.spawn(async move {
        connection::farewell(stream, reply.to_http1_bytes()).await;
        drop(permit);
    });
}

/// The open connections, for the cap.
struct OpenConnections {
    cap: usize,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next: AtomicU64,
}

/// A connection's place among the open connections, given back when dropped.
struct Slot {
    open_connections: Arc<OpenConnections>,
    id: u64,
    activity: Arc<Activity>,
}

impl OpenConnections {
    /// A place for a new connection: a free one, or the one of the connection unused for longest, which is told
    /// to close; `None` when every connection has a request in flight. A connection whose request starts while it
    /// is being chosen is not evicted (see `Activity::try_evict`): the next unused one is.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.open.lock().unwrap();
        if open.len() >= self.cap {
            let mut unused: Vec<_> =
                open.iter().filter_map(|(id, activity)| Some((activity.unused_since()?, *id))).collect();
            unused.sort_unstable();
            let victim = unused.into_iter().find(|(_, id)| open[id].try_evict())?;
            open.remove(&victim.1);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        open.insert(id, activity.clone());
        Some(Slot { open_connections: self.clone(), id, activity })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open_connections.open.lock().unwrap().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_longest_unused_connection_gives_way() {
        let open_connections = Arc::new(OpenConnections { cap: 2, open: Mutex::default(), next: AtomicU64::new(0) });
        let first = open_connections.admit().unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = open_connections.admit().unwrap();
        let _busy = second.activity.request_started().unwrap();
        let third = open_connections.admit().unwrap();
        assert!(first.activity.unused_since().is_some());
        tokio::time::timeout(Duration::from_secs(1), first.activity.evicted()).await.expect("first evicted");
        let _busy_too = third.activity.request_started().unwrap();
        assert!(first.activity.request_started().is_err(), "the evicted one starts no request");
        assert!(open_connections.admit().is_none(), "every connection has a request in flight");
        drop(second);
        assert!(open_connections.admit().is_some(), "room again once a connection closed");
    }
}
