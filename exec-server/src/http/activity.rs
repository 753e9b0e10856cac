//! What one connection is doing: waiting between requests, receiving a request head, or serving a request. Its
//! timeouts follow from that, and so does which connection gives way when the connection cap is reached.
//!
//! - A new connection must deliver its first request head within the header timeout: it was opened to send one.
//! - Between requests a keep-alive connection may wait the idle timeout; once a byte of the next request arrives,
//!   the head must be complete within the header timeout of that byte (a client that trickles a head, slowloris,
//!   is closed however steadily it trickles).
//! - A request in flight (its body being read, its command running, its reply or stream being sent) is never
//!   idle: a long build with a quiet stream, or a client slow to read its reply, keeps its connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The connection timeouts (`None`: no limit).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub header: Option<Duration>,
    pub idle: Option<Duration>,
}

/// Why a connection's time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// A request head did not arrive in time: answered with 408 before closing.
    Header,
    /// A keep-alive connection stayed unused: closed without a word, as HTTP allows.
    Idle,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in flight and no byte of the next one since `since`; `fresh` until a first request came.
    Waiting { since: Instant, fresh: bool },
    /// Bytes of a request head arrived, the first at `since`.
    Head { since: Instant },
    /// A request is in flight.
    Busy,
}

/// One connection's activity, shared by its socket (bytes arriving), its service (requests starting and ending),
/// its watchdog (the timeouts) and the connection registry (eviction).
#[derive(Debug)]
pub struct Activity {
    phase: Mutex<Phase>,
    /// Whether `phase` is `Waiting`: the one thing a read checks, without the lock.
    waiting: AtomicBool,
    changed: Notify,
    evicted: CancellationToken,
}

impl Activity {
    pub fn new() -> Self {
        Activity {
            phase: Mutex::new(Phase::Waiting { since: Instant::now(), fresh: true }),
            waiting: AtomicBool::new(true),
            changed: Notify::new(),
            evicted: CancellationToken::new(),
        }
    }

    /// Bytes arrived on the socket: while waiting, they start the next request's head (whose clock starts now, or
    /// for a new connection's first request, when the connection opened).
    pub fn bytes_read(&self) {
        if self.waiting.load(Ordering::Relaxed) {
            let since = match *self.phase.lock().unwrap() {
                Phase::Waiting { since, fresh: true } => since,
                _ => Instant::now(),
            };
            self.set(Phase::Head { since });
        }
    }

    /// A request head is complete and handed to the service. The returned guard ends the request when dropped
    /// (its response body sent to the end, or dropped).
    pub fn request_started(self: &std::sync::Arc<Self>) -> InFlight {
        self.set(Phase::Busy);
        InFlight(self.clone())
    }

    /// When the connection's time runs out in its current phase, and why (`None`: not while it is in this phase).
    pub fn deadline(&self, timeouts: Timeouts) -> Option<(Instant, Expiry)> {
        match *self.phase.lock().unwrap() {
            Phase::Busy => None,
            Phase::Head { since } | Phase::Waiting { since, fresh: true } => {
                timeouts.header.map(|limit| (since + limit, Expiry::Header))
            }
            Phase::Waiting { since, fresh: false } => timeouts.idle.map(|limit| (since + limit, Expiry::Idle)),
        }
    }

    /// Since when the connection has had no request in flight, or `None` while it has one.
    pub fn unused_since(&self) -> Option<Instant> {
        match *self.phase.lock().unwrap() {
            Phase::Busy => None,
            Phase::Head { since } | Phase::Waiting { since, .. } => Some(since),
        }
    }

    /// Resolves at the next change of phase after it is called (or at once if one happened since the last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Asks the connection to close to make room for a new one.
    pub fn evict(&self) {
        self.evicted.cancel();
    }

    pub async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    fn set(&self, phase: Phase) {
        let mut current = self.phase.lock().unwrap();
        if let (Phase::Head { .. }, Phase::Head { .. }) = (*current, phase) {
            return;
        }
        *current = phase;
        self.waiting.store(matches!(phase, Phase::Waiting { .. }), Ordering::Relaxed);
        self.changed.notify_one();
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

/// A request in flight; dropping it puts the connection back to waiting.
#[derive(Debug)]
pub struct InFlight(std::sync::Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.set(Phase::Waiting { since: Instant::now(), fresh: false });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const LIMITS: Timeouts = Timeouts { header: Some(Duration::from_secs(10)), idle: Some(Duration::from_secs(60)) };

    fn kind(activity: &Activity) -> Option<(Expiry, u64)> {
        activity.deadline(LIMITS).map(|(at, expiry)| (expiry, (at - Instant::now()).as_secs_f64().round() as u64))
    }

    #[test]
    fn each_phase_has_its_own_clock() {
        let activity = Arc::new(Activity::new());
        assert_eq!(kind(&activity), Some((Expiry::Header, 10)), "a new connection must send its head");
        activity.bytes_read();
        assert_eq!(kind(&activity), Some((Expiry::Header, 10)));
        let request = activity.request_started();
        assert_eq!(kind(&activity), None, "a request in flight has no deadline");
        assert_eq!(activity.unused_since(), None);
        drop(request);
        assert_eq!(kind(&activity), Some((Expiry::Idle, 60)), "between requests: the idle timeout");
        activity.bytes_read();
        let head_from = activity.unused_since().unwrap();
        assert_eq!(kind(&activity), Some((Expiry::Header, 10)), "a byte of the next request starts its head");
        std::thread::sleep(Duration::from_millis(5));
        activity.bytes_read();
        assert_eq!(activity.unused_since(), Some(head_from), "more bytes of the same head do not extend it");
    }
}
