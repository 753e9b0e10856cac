//! Sending a streamed run's stdin: the reader's chunks POSTed in order to
//! `/runs/{id}/stdin?offset=N`, one in flight, the last with `eof=true`; resent from the server's `received` after a
//! lost connection (offsets make a repeat harmless). It stops when the server says stdin is closed (the command
//! closed it, or the run ended): the client's stdin is then no longer read.

use std::cell::Cell;
use std::time::Instant;

use protocol::{ErrorBody, ErrorCode, RunId, StdinReply};
use tokio::sync::{mpsc, watch};

use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::stdin::source::{self as stdin_source, Piece, StdinSource};
use crate::sidecar::wire::backoff::Backoff;
use crate::sidecar::wire::body::{read_bounded, MAX_SMALL_BODY_BYTES};
use crate::sidecar::wire::http::{authorized, transport_error};
use crate::terminal_safe::terminal_safe;

/// How many answers in a row may move the server's offset no further (a gap at the very offset it said to resend
/// from, a 200 that took nothing, a gap that sends it back) before the sender gives up on it: a broken server; a real
/// gap is mended by the first resend.
pub const GAP_REFUSALS: u32 = 5;

/// Where the sender sends, and what it reports back.
pub struct StdinPump<'a> {
    pub target: &'a Endpoint,
    pub client: &'a reqwest::Client,
    pub settings: &'a CallSettings,
    pub id: &'a RunId,
    pub source: StdinSource,
    /// Set by the output side once a reply said the server opened stdin ([`protocol::STDIN_STREAM_HEADER`]).
    pub open: watch::Receiver<bool>,
    /// The bytes the server has taken so far (its `received`).
    pub taken: &'a Cell<u64>,
    /// Ask the server where the run's stdin is before the first bytes (an empty POST at offset 0): a client that takes
    /// over a run someone else typed into does not know.
    pub ask_offset: bool,
}

/// Why sending stopped before EOF was taken.
#[derive(Debug)]
pub enum PumpEnd {
    /// Everything up to EOF was taken, or the server closed stdin: nothing more to send.
    Done,
    /// Sending failed for good: the line to print (the command goes on and reads EOF).
    Failed(String),
}

impl StdinPump<'_> {
    /// Waits until stdin is open on the server, then sends it all. Never ends before then (the call's end drops it).
    pub async fn run(mut self) -> PumpEnd {
        if self.open.wait_for(|open| *open).await.is_err() {
            return std::future::pending().await;
        }
        if self.ask_offset {
            match self.send(&[], false).await {
                Ok(true) => return PumpEnd::Done,
                Ok(false) => {}
                Err(message) => return PumpEnd::Failed(message),
            }
        }
        let mut chunks = stdin_source::start_reader(self.source);
        let mut next = chunks.recv().await;
        loop {
            let (mut data, mut eof) = match next.take() {
                Some(Piece::Bytes(data)) => (data, false),
                Some(Piece::End) | None => (Vec::new(), true),
                Some(Piece::Failed(err)) => {
                    crate::sidecar::tty::raw_mode::eprint_line(&format!(
                        "sidecar-exec: cannot read stdin ({err}): the command gets an end of input here"
                    ));
                    (Vec::new(), true)
                }
            };
            // What was read while the last request was in flight goes in this one (keystrokes typed meanwhile are
            // one POST), up to a chunk; a chunk that is the last one goes with the EOF (a heredoc is one request).
            while !eof && next.is_none() {
                match chunks.try_recv() {
                    Ok(Piece::Bytes(more)) if data.len() + more.len() <= stdin_source::CHUNK_BYTES => {
                        data.extend_from_slice(&more);
                    }
                    Ok(Piece::End) => eof = true,
                    Ok(piece) => next = Some(piece),
                    Err(mpsc::error::TryRecvError::Disconnected) => eof = true,
                    Err(mpsc::error::TryRecvError::Empty) => break,
                }
            }
            match self.send(&data, eof).await {
                Ok(true) => return PumpEnd::Done,
                Ok(false) if eof => return PumpEnd::Done,
                Ok(false) => {}
                Err(message) => return PumpEnd::Failed(message),
            }
            if next.is_none() {
                next = chunks.recv().await;
            }
        }
    }

    /// Sends `data` at the current offset (and the EOF): `Ok(true)` when the server closed stdin.
    ///
    /// *Decision:* a request is not bounded by a deadline of its own: the server legitimately holds it while the
    /// command does not read (up to as long as the command runs), and it never holds the client, whose end comes
    /// with the output stream's (which has the silence bound). What is bounded is retrying: transport failures and
    /// 5xx for the reconnect window without progress, and a `stdin_gap` that does not move (the server refuses the
    /// very offset it said to resend from) after [`GAP_REFUSALS`] answers, with the backoff between them.
    async fn send(&mut self, data: &[u8], eof: bool) -> Result<bool, String> {
        let start = self.taken.get();
        let end = start.saturating_add(data.len() as u64);
        let mut backoff = Backoff::new();
        let mut lost_since: Option<Instant> = None;
        let reconnect_for = self.settings.patience.reconnect_for();
        // Answers in a row that took the server's offset no further than it had been (a 200 that took nothing, a gap
        // at the offset it said to resend from, a gap that sends it back): a broken server, given up on after
        // GAP_REFUSALS. Transport failures and 5xx are bounded by the reconnect window instead.
        let mut stalled = 0;
        let mut furthest = start;
        loop {
            let offset = self.taken.get();
            let rest = &data[usize::try_from(offset - start).unwrap_or(data.len()).min(data.len())..];
            let path = format!("/runs/{}/stdin?offset={offset}{}", self.id, if eof { "&eof=true" } else { "" });
            let request = authorized(self.client.post(self.target.endpoint(&path)), self.target, Some(self.settings))
                .header("content-type", "application/octet-stream")
                .body(rest.to_vec());
            let response = match request.send().await {
                Ok(response) => response,
                Err(err) => {
                    let why = transport_error(self.target, &err);
                    if lost_since.get_or_insert_with(Instant::now).elapsed() >= reconnect_for {
                        return Err(format!("stdin could not be sent: {why}"));
                    }
                    tokio::time::sleep(backoff.next_wait()).await;
                    continue;
                }
            };
            let status = response.status();
            let body = read_bounded(response, MAX_SMALL_BODY_BYTES).await.unwrap_or_default();
            let stall = match answer(status, &body, start..end, offset) {
                Answer::Taken { received, closed } => {
                    self.taken.set(received.max(offset));
                    if closed {
                        return Ok(true);
                    }
                    if self.taken.get() >= end {
                        return Ok(false);
                    }
                    Stall::NothingTaken
                }
                Answer::ResendFrom(received) => {
                    self.taken.set(received);
                    Stall::NothingTaken
                }
                Answer::GapAtOffset(received) => {
                    self.taken.set(received);
                    Stall::GapAt { offset, received }
                }
                Answer::Closed => return Ok(true),
                Answer::ServerError => {
                    if lost_since.get_or_insert_with(Instant::now).elapsed() >= reconnect_for {
                        return Err(format!(
                            "stdin could not be sent: sidecar at {} answered {status} for {} s",
                            self.target.url,
                            reconnect_for.as_secs()
                        ));
                    }
                    tokio::time::sleep(backoff.next_wait()).await;
                    continue;
                }
                Answer::Broken(why) => return Err(why.line(&self.target.url, self.id, status)),
            };
            if self.taken.get() > furthest {
                (furthest, stalled) = (self.taken.get(), 0);
                continue;
            }
            stalled += 1;
            if stalled >= GAP_REFUSALS {
                return Err(stall.line(&self.target.url));
            }
            tokio::time::sleep(backoff.next_wait()).await;
        }
    }
}

/// The last of the answers that took the offset no further: what the give-up line says.
enum Stall {
    /// The server took nothing, or sent the offset back.
    NothingTaken,
    /// A gap at (or past) the very offset the server had said to resend from.
    GapAt { offset: u64, received: u64 },
}

impl Stall {
    fn line(&self, url: &str) -> String {
        match self {
            Stall::NothingTaken => format!(
                "sidecar at {url} took no more stdin in {GAP_REFUSALS} answers in a row: stdin stops here (the command \
                 gets no more input)"
            ),
            Stall::GapAt { offset, received } => format!(
                "sidecar at {url} refused stdin at offset {offset} as a gap {GAP_REFUSALS} times, saying it has \
                 {received} bytes, which is where it was sent from: stdin stops here (the command gets no more input)"
            ),
        }
    }
}

/// What an answer to a stdin POST of the bytes `sent` (at `offset`) means, decided from its status and body alone.
#[derive(Debug, PartialEq)]
enum Answer {
    /// A 2xx: the server has `received` bytes (and stdin is `closed`).
    Taken { received: u64, closed: bool },
    /// A gap below the offset sent from (a lost request's bytes): resend from there.
    ResendFrom(u64),
    /// A gap at the very offset (or past it) the server said to resend from: it contradicts itself.
    GapAtOffset(u64),
    /// Nothing more to send: closed by an EOF already taken, the run is gone or never took input, or a terminal
    /// (which has no EOF) took what came before the hung-up local terminal's.
    Closed,
    /// A 5xx: retried for the reconnect window.
    ServerError,
    /// Stdin stops here, for this reason.
    Broken(Broken),
}

/// Why stdin stops on an answer.
#[derive(Debug, PartialEq)]
enum Broken {
    /// A 2xx whose body is not the stdin reply.
    Unreadable,
    /// The server says it has `received` bytes, more than were sent (`end`).
    MoreThanSent { received: u64, end: u64 },
    /// The server has `received` bytes, fewer than it acknowledged before (`start`).
    FewerThanAcknowledged { received: u64 },
    /// A gap without the offset to resend from.
    GapWithoutOffset,
    /// Another client of the run sent its input while this request waited.
    Superseded,
    /// Any other refusal, with the server's words.
    Refused(String),
}

impl Broken {
    /// The line that ends stdin.
    fn line(&self, url: &str, id: &RunId, status: reqwest::StatusCode) -> String {
        match self {
            Broken::Unreadable => format!("sidecar at {url} sent an unreadable reply to stdin"),
            Broken::MoreThanSent { received, end } => {
                format!("sidecar at {url} says it took {received} bytes of stdin, more than the {end} sent: stdin stops here")
            }
            Broken::FewerThanAcknowledged { received } => {
                format!("sidecar at {url} has {received} bytes of stdin, fewer than it acknowledged: stdin stops here")
            }
            Broken::GapWithoutOffset => format!("sidecar at {url} refused stdin as a gap"),
            Broken::Superseded => format!(
                "another client of run {id} sent it input while this one waited (stdin_superseded): this client's \
                 stdin stops here"
            ),
            Broken::Refused(text) => {
                format!("sidecar at {url} refused stdin ({status}): {}", terminal_safe(text.trim()))
            }
        }
    }
}

/// The decider of [`StdinPump::send`]: what the answer `status`, `body` to the bytes `sent` POSTed at `offset` means.
fn answer(status: reqwest::StatusCode, body: &[u8], sent: std::ops::Range<u64>, offset: u64) -> Answer {
    let (start, end) = (sent.start, sent.end);
    // An empty POST asks where the run's stdin is (a client taking over a run another typed into): any offset
    // from the one this client knows on is an answer, not more than was sent.
    let end = if start == end { u64::MAX } else { end };
    if status.is_success() {
        return match serde_json::from_slice::<StdinReply>(body) {
            Err(_) => Answer::Broken(Broken::Unreadable),
            // A protocol violation, which a wrapping addition would have hidden.
            Ok(reply) if reply.received > end => Answer::Broken(Broken::MoreThanSent { received: reply.received, end }),
            Ok(reply) => Answer::Taken { received: reply.received, closed: reply.closed },
        };
    }
    let refusal = serde_json::from_slice::<ErrorBody>(body).ok();
    match refusal.as_ref().and_then(|body| body.code) {
        Some(ErrorCode::StdinGap) => match refusal.and_then(|body| body.received) {
            // The server has less than we think it took: those bytes are gone from here.
            Some(received) if received < start => Answer::Broken(Broken::FewerThanAcknowledged { received }),
            Some(received) if received > end => Answer::Broken(Broken::MoreThanSent { received, end }),
            Some(received) if received >= offset => Answer::GapAtOffset(received),
            Some(received) => Answer::ResendFrom(received),
            None => Answer::Broken(Broken::GapWithoutOffset),
        },
        // Another client of the run sent its stdin while this request waited: that client has the input now, and
        // two writers would only interleave keys.
        Some(ErrorCode::StdinSuperseded) => Answer::Broken(Broken::Superseded),
        Some(
            ErrorCode::StdinClosed | ErrorCode::RunNotKnown | ErrorCode::StdinNotOpen | ErrorCode::StdinIsATerminal,
        ) => Answer::Closed,
        _ if status.is_server_error() => Answer::ServerError,
        _ => Answer::Broken(Broken::Refused(
            refusal.map_or_else(|| String::from_utf8_lossy(body).into_owned(), |body| body.error),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    #[test]
    fn answers_are_read_by_their_status_code_and_offsets() {
        let ok = |body: &str| answer(StatusCode::OK, body.as_bytes(), 10..20, 10);
        assert_eq!(ok(r#"{"received":15,"closed":false}"#), Answer::Taken { received: 15, closed: false });
        assert_eq!(ok(r#"{"received":20,"closed":true}"#), Answer::Taken { received: 20, closed: true });
        assert_eq!(
            ok(r#"{"received":21,"closed":false}"#),
            Answer::Broken(Broken::MoreThanSent { received: 21, end: 20 })
        );
        assert_eq!(ok("not json"), Answer::Broken(Broken::Unreadable));
        // Asking where stdin is (nothing sent): the server's offset, however far on.
        let asked = answer(StatusCode::OK, br#"{"received":4,"closed":false}"#, 0..0, 0);
        assert_eq!(asked, Answer::Taken { received: 4, closed: false });
        let refused = |status, body: &str| answer(status, body.as_bytes(), 10..20, 14);
        let gap = |received: u64| format!(r#"{{"error":"gap","code":"stdin_gap","received":{received}}}"#);
        assert_eq!(refused(StatusCode::CONFLICT, &gap(12)), Answer::ResendFrom(12));
        assert_eq!(refused(StatusCode::CONFLICT, &gap(14)), Answer::GapAtOffset(14));
        assert_eq!(
            refused(StatusCode::CONFLICT, &gap(9)),
            Answer::Broken(Broken::FewerThanAcknowledged { received: 9 })
        );
        assert_eq!(
            refused(StatusCode::CONFLICT, &gap(u64::MAX)),
            Answer::Broken(Broken::MoreThanSent { received: u64::MAX, end: 20 })
        );
        let code = |code: &str| format!(r#"{{"error":"x","code":"{code}"}}"#);
        assert_eq!(refused(StatusCode::CONFLICT, &code("stdin_superseded")), Answer::Broken(Broken::Superseded));
        assert_eq!(refused(StatusCode::CONFLICT, &code("stdin_closed")), Answer::Closed);
        assert_eq!(refused(StatusCode::NOT_FOUND, &code("run_not_known")), Answer::Closed);
        assert_eq!(refused(StatusCode::SERVICE_UNAVAILABLE, "busy"), Answer::ServerError);
        assert_eq!(refused(StatusCode::FORBIDDEN, r#"{"error":"no"}"#), Answer::Broken(Broken::Refused("no".into())));
    }
}
