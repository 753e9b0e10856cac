//! How long the client waits on a sidecar that says nothing (SIDECAR_SILENCE), and on a follow-up request's answer:
//! part of the call's settings ([`crate::sidecar::config::settings::CallSettings::patience`]).

use std::time::Duration;

/// The longest a follow-up request (a reconnect, stdin, a signal, a resize, a cancel) waits for its answer: each is
/// answered at once by a server that is there.
pub const FOLLOW_UP_WITHIN: Duration = Duration::from_secs(10);

/// How long the client waits on a sidecar that says nothing (SIDECAR_SILENCE), where silence is abnormal.
///
/// *Decision:* one figure, the silence bound (60 s by default: four of exec-server's 15 s keep-alive intervals, so a
/// loaded server that misses a few is not given up on). An event stream without a byte for that long is lost; the
/// client then reconnects for as long again before it gives up, so a stream whose server stopped answering ends
/// within twice the bound (about 120 s); each reconnect, and every other follow-up request, waits for its answer at
/// most [`FOLLOW_UP_WITHIN`] (or the bound, when shorter). A blocking call, and a negotiated `POST /exec` until its
/// reply head, are silent by design (a contract server answers at the command's end): those wait until
/// SIDECAR_TIMEOUT + 30 s, as the contract says. The variable lets tests run the whole sequence in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    /// How long an event stream may go without a byte.
    pub silence: Duration,
}

impl Patience {
    pub const DEFAULT: Patience = Patience { silence: Duration::from_secs(60) };

    /// How long reconnecting goes on without progress before the client gives up: as long as the silence bound.
    pub fn reconnect_for(self) -> Duration {
        self.silence
    }

    /// How long one follow-up request waits for its answer.
    pub fn follow_up(self) -> Duration {
        FOLLOW_UP_WITHIN.min(self.silence)
    }
}

impl Default for Patience {
    fn default() -> Self {
        Patience::DEFAULT
    }
}
