//! A named run's stdin as its clients send it (docs/exec-server.md, "Streamed stdin"): chunks at offsets, so that a
//! chunk resent after a lost reply is taken once and a chunk after a hole is refused; the EOF; and the bound on input
//! the command has not yet read, which holds a sender back (its request waits) rather than telling it to retry.

use std::sync::Mutex;

use bytes::Bytes;
use protocol::StdinReply;
use tokio::sync::watch;

use crate::engine::stdin::StdinFeed;

/// Input a run holds that its command has not taken into its pipe yet (beside the pipe's own 64 KiB): a chunk that
/// does not fit waits. As large as one request body, so a body always fits once the command has read the rest.
pub const MAX_UNWRITTEN: u64 = protocol::MAX_BODY_BYTES as u64;

/// The stdin of a run that asked for `stdin_stream` (or a terminal).
#[derive(Debug)]
pub struct RunInput {
    feed: StdinFeed,
    /// A terminal's input: bytes the line discipline reads, and no EOF.
    terminal: bool,
    state: Mutex<State>,
    /// The number of the latest request to wait for room ([`RunInput::hold`]): the one held request.
    holder: watch::Sender<u64>,
}

/// A request waiting for room in a run's input: the run's one held request until a newer one waits.
///
/// *Decision:* one held request per run, the newest: a held body is up to 1 MiB, and without a bound every
/// connection could hold one (200 connections took the server from 14 to 236 MB). The newest, not the first,
/// because a client that lost its connection resends from `received` while the server may still hold the request
/// it lost: refusing the newer would lock it out; superseding the older costs a client that sends two at once
/// (against the protocol's one request in flight) only that older request, answered 409 `stdin_superseded`.
pub struct Hold {
    ticket: u64,
    holder: watch::Receiver<u64>,
}

impl Hold {
    /// Resolves once a newer request holds the run's input in place of this one.
    pub async fn superseded(&mut self) {
        let ticket = self.ticket;
        if self.holder.wait_for(|latest| *latest != ticket).await.is_err() {
            // The run's input is gone with its sender: nothing can supersede this request any more.
            std::future::pending::<()>().await;
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Bytes taken so far: the offset the next new byte has.
    received: u64,
    /// The client's EOF was taken.
    eof: bool,
}

/// Why a chunk is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRefusal {
    /// It starts beyond the bytes taken: the client resends from `received`.
    Gap { received: u64 },
    /// It holds bytes past the EOF the run already took.
    PastEof { received: u64 },
    /// An EOF for a terminal, which has none.
    IsATerminal,
}

/// What [`RunInput::try_take`] did.
#[derive(Debug)]
pub enum Taken {
    /// Taken (or ignored as a repeat, or discarded as stdin is closed): the reply.
    Done(StdinReply),
    /// The chunk does not fit yet: try again once this receiver changes (the command read, or stdin closed).
    Wait(watch::Receiver<u64>),
}

impl RunInput {
    pub fn new(feed: StdinFeed, terminal: bool) -> Self {
        RunInput { feed, terminal, state: Mutex::default(), holder: watch::Sender::new(0) }
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    /// The chunk `bytes` at stream offset `offset`, then the EOF if `eof`: taken from the bytes not taken yet on,
    /// or refused, or to wait for room.
    pub fn try_take(&self, offset: u64, bytes: &Bytes, eof: bool) -> Result<Taken, InputRefusal> {
        if eof && self.terminal {
            return Err(InputRefusal::IsATerminal);
        }
        // Before the look at what the pipe took: a change after it wakes the wait.
        let changes = self.feed.subscribe();
        let mut state = self.state.lock().unwrap();
        let received = state.received;
        let end = offset.saturating_add(bytes.len() as u64);
        if state.eof {
            // A repeat of what came before the EOF (or of the EOF itself) is answered; new bytes are refused.
            if !bytes.is_empty() && end > received {
                return Err(InputRefusal::PastEof { received });
            }
            return Ok(Taken::Done(self.reply(&state)));
        }
        if self.feed.closed().is_some() {
            // The command closed its stdin or ended: discarded, as a write to a closed pipe is.
            return Ok(Taken::Done(self.reply(&state)));
        }
        if offset > received {
            return Err(InputRefusal::Gap { received });
        }
        // A repeat is skipped; an overlap is taken from `received` on.
        let skip = usize::try_from(received - offset).unwrap_or(usize::MAX).min(bytes.len());
        let new = bytes.slice(skip..);
        if !new.is_empty() {
            let unwritten = received.saturating_sub(self.feed.written());
            if unwritten > 0 && unwritten + new.len() as u64 > MAX_UNWRITTEN {
                return Ok(Taken::Wait(changes));
            }
            state.received += new.len() as u64;
            self.feed.send(new);
        }
        if eof {
            state.eof = true;
            self.feed.finish();
        }
        Ok(Taken::Done(self.reply(&state)))
    }

    /// Makes the caller, a request whose chunk must wait ([`Taken::Wait`]), the run's one held request: the one
    /// held before it is superseded.
    pub fn hold(&self) -> Hold {
        let mut ticket = 0;
        self.holder.send_modify(|latest| {
            *latest += 1;
            ticket = *latest;
        });
        Hold { ticket, holder: self.holder.subscribe() }
    }

    /// [`RunInput::try_take`], waiting for room as long as it takes (until stdin closes).
    pub async fn take(&self, offset: u64, bytes: &Bytes, eof: bool) -> Result<StdinReply, InputRefusal> {
        loop {
            match self.try_take(offset, bytes, eof)? {
                Taken::Done(reply) => return Ok(reply),
                Taken::Wait(mut changes) => {
                    let _ = changes.changed().await;
                }
            }
        }
    }

    /// Where the input stands.
    pub fn status(&self) -> StdinReply {
        self.reply(&self.state.lock().unwrap())
    }

    fn reply(&self, state: &State) -> StdinReply {
        StdinReply { received: state.received, closed: state.eof || self.feed.closed().is_some() }
    }

    /// The run has ended (or its command never started): nothing more goes in, and waiting requests are answered.
    pub fn run_ended(&self) {
        self.feed.ended();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll};

    use super::*;
    use crate::engine::stdin::stdin_stream;

    fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(std::task::Waker::noop()))
    }

    fn chunk(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn repeats_are_ignored_overlaps_taken_from_received_gaps_refused() {
        let (feed, _stream) = stdin_stream();
        let input = RunInput::new(feed, false);
        let done = |taken| match taken {
            Ok(Taken::Done(reply)) => Ok(reply),
            Ok(Taken::Wait(_)) => panic!("nothing should wait here"),
            Err(refusal) => Err(refusal),
        };
        assert_eq!(done(input.try_take(0, &chunk("abc"), false)), Ok(StdinReply { received: 3, closed: false }));
        assert_eq!(done(input.try_take(0, &chunk("abc"), false)), Ok(StdinReply { received: 3, closed: false }));
        assert_eq!(done(input.try_take(2, &chunk("cde"), false)), Ok(StdinReply { received: 5, closed: false }));
        assert_eq!(done(input.try_take(9, &chunk("x"), false)), Err(InputRefusal::Gap { received: 5 }));
        assert_eq!(done(input.try_take(0, &Bytes::new(), false)), Ok(StdinReply { received: 5, closed: false }));
        assert_eq!(done(input.try_take(5, &chunk("f"), true)), Ok(StdinReply { received: 6, closed: true }));
        // After the EOF: a repeat (data or EOF) is answered, new bytes are refused.
        assert_eq!(done(input.try_take(5, &chunk("f"), true)), Ok(StdinReply { received: 6, closed: true }));
        assert_eq!(done(input.try_take(6, &Bytes::new(), true)), Ok(StdinReply { received: 6, closed: true }));
        assert_eq!(done(input.try_take(6, &chunk("g"), false)), Err(InputRefusal::PastEof { received: 6 }));
        let (feed, _stream) = stdin_stream();
        let terminal = RunInput::new(feed, true);
        assert_eq!(done(terminal.try_take(0, &chunk("\u{4}"), true)), Err(InputRefusal::IsATerminal));
        assert_eq!(done(terminal.try_take(0, &chunk("\u{4}"), false)), Ok(StdinReply { received: 1, closed: false }));
    }

    /// Beyond [`MAX_UNWRITTEN`] bytes the command has not taken, a chunk waits; the run's end releases it, with
    /// nothing taken.
    #[test]
    fn a_chunk_that_does_not_fit_waits_until_the_run_ends() {
        let (feed, _stream) = stdin_stream();
        let input = RunInput::new(feed, false);
        let full = Bytes::from(vec![b'x'; protocol::MAX_BODY_BYTES]);
        assert!(matches!(input.try_take(0, &full, false), Ok(Taken::Done(StdinReply { closed: false, .. }))));
        let mut waiting = pin!(input.take(MAX_UNWRITTEN, &full, false));
        assert!(poll_once(waiting.as_mut()).is_pending(), "1 MiB unread: the next chunk waits");
        assert!(poll_once(waiting.as_mut()).is_pending());
        input.run_ended();
        let reply = match poll_once(waiting.as_mut()) {
            Poll::Ready(reply) => reply,
            Poll::Pending => panic!("the run's end must release the wait"),
        };
        assert_eq!(reply, Ok(StdinReply { received: MAX_UNWRITTEN, closed: true }), "nothing more taken");
    }

    #[test]
    fn a_newer_hold_supersedes_the_held_one() {
        let (feed, _stream) = stdin_stream();
        let input = RunInput::new(feed, false);
        let mut first = input.hold();
        assert!(poll_once(pin!(first.superseded())).is_pending(), "the only one held");
        let mut second = input.hold();
        assert!(poll_once(pin!(first.superseded())).is_ready(), "a newer one holds in its place");
        assert!(poll_once(pin!(second.superseded())).is_pending());
    }
}
