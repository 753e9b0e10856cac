//! What one connection is doing: waiting between requests, receiving a request head, or serving a request. Its
//! timeouts follow from that, and so does which connection gives way when the connection cap is reached.
//!
//! - A new connection must deliver its first request head within the header timeout: it was opened to send one.
//! - Between requests a keep-alive connection may wait the idle timeout; once a byte of the next request arrives,
//!   the head must be complete within the header timeout of that byte (a client that trickles a head, slowloris,
//!   is closed however steadily it trickles).
//! - A request in flight (its body being read, its command running, its reply or stream being sent) is never
//!   idle: a long build with a quiet stream, or a client slow to read its reply, keeps its connection.
//! - Eviction and the start of a request are one decision, taken under one lock: a connection with a request in
//!   flight cannot be evicted, and an evicted connection starts no request (its head, if one completes, is answered
//!   503). Otherwise a request that started just as its connection was chosen would be dropped, its command
//!   cancelled, its client left with no reply.

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
/// its watchdog (the timeouts) and the open connections (eviction at the cap).
#[derive(Debug)]
pub struct Activity {
    state: Mutex<State>,
    /// Whether `phase` is `Waiting`: the one thing a read checks, without the lock.
    waiting: AtomicBool,
    changed: Notify,
    evicted: CancellationToken,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Chosen to make room for a new connection: no request starts on it any more.
    evicted: bool,
    /// A request head completed after the eviction and was refused: its 503 is to be sent before closing.
    refused: bool,
}

/// The connection was evicted before this request could start: answer 503 and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted;

impl Activity {
    pub fn new() -> Self {
        Activity {
            state: Mutex::new(State {
                phase: Phase::Waiting { since: Instant::now(), fresh: true },
                evicted: false,
                refused: false,
            }),
            waiting: AtomicBool::new(true),
            changed: Notify::new(),
            evicted: CancellationToken::new(),
        }
    }

    /// Bytes arrived on the socket: while waiting, they start the next request's head (whose clock starts now, or
    /// for a new connection's first request, when the connection opened).
    pub fn bytes_read(&self) {
        if self.waiting.load(Ordering::Relaxed) {
            let since = match self.state.lock().unwrap().phase {
                Phase::Waiting { since, fresh: true } => since,
                _ => Instant::now(),
            };
            self.set(Phase::Head { since });
        }
    }

    /// A request head is complete and handed to the service. The returned guard ends the request when dropped
    /// (its response body sent to the end, or dropped); an evicted connection starts no request.
    pub fn request_started(self: &std::sync::Arc<Self>) -> Result<InFlight, Evicted> {
        let mut state = self.state.lock().unwrap();
        if state.evicted {
            state.refused = true;
            return Err(Evicted);
        }
        self.set_locked(&mut state, Phase::Busy);
        Ok(InFlight(self.clone()))
    }

    /// When the connection's time runs out in its current phase, and why (`None`: not while it is in this phase).
    pub fn deadline(&self, timeouts: Timeouts) -> Option<(Instant, Expiry)> {
        match self.state.lock().unwrap().phase {
            Phase::Busy => None,
            Phase::Head { since } | Phase::Waiting { since, fresh: true } => {
                timeouts.header.map(|limit| (since + limit, Expiry::Header))
            }
            Phase::Waiting { since, fresh: false } => timeouts.idle.map(|limit| (since + limit, Expiry::Idle)),
        }
    }

    /// Since when the connection has had no request in flight, or `None` while it has one.
    pub fn unused_since(&self) -> Option<Instant> {
        match self.state.lock().unwrap().phase {
            Phase::Busy => None,
            Phase::Head { since } | Phase::Waiting { since, .. } => Some(since),
        }
    }

    /// Resolves at the next change of phase after it is called (or at once if one happened since the last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Asks the connection to close to make room for a new one, unless a request is in flight on it (then it
    /// stays, and `false` says so). Once evicted, no request starts on it.
    pub fn try_evict(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if matches!(state.phase, Phase::Busy) {
            return false;
        }
        state.evicted = true;
        self.evicted.cancel();
        true
    }

    pub async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Whether a request was refused because the connection had been evicted (its 503 is owed).
    pub fn refused_a_request(&self) -> bool {
        self.state.lock().unwrap().refused
    }

    fn set(&self, phase: Phase) {
        self.set_locked(&mut self.state.lock().unwrap(), phase);
    }

    fn set_locked(&self, state: &mut State, phase: Phase) {
        if let (Phase::Head { .. }, Phase::Head { .. }) = (state.phase, phase) {
            return;
        }
        state.phase = phase;
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
        let request = activity.request_started().unwrap();
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

    #[test]
    fn eviction_and_a_request_starting_exclude_each_other() {
        let busy = Arc::new(Activity::new());
        let request = busy.request_started().unwrap();
        assert!(!busy.try_evict(), "a connection with a request in flight is never evicted");
        drop(request);
        assert!(busy.try_evict(), "between requests it may be");

        let idle = Arc::new(Activity::new());
        idle.bytes_read();
        assert!(idle.try_evict(), "a head still arriving does not protect a connection");
        assert!(!idle.refused_a_request());
        assert_eq!(idle.request_started().err(), Some(Evicted), "an evicted connection starts no request");
        assert!(idle.refused_a_request(), "its refusal is owed a reply");
        assert!(idle.unused_since().is_some(), "and stays unused");
    }
}
