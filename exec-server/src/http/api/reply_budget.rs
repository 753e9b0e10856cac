//! What a `/exec` reply keeps of a stream larger than `--max-output`: the first and the last part (build errors are
//! at the end), half the budget each, with the cut marked in place: `\n[… N bytes dropped …]\n`. HTTP's capture
//! ([`ReplyCapture`]) for an unnamed `/exec`, and the cut of a named run's log for its reply.
//!
//! The budget counts encoded bytes, as the reply carries them (escaped text, plus base64 when not UTF-8: see
//! `protocol::reply_text`). Memory stays bounded by the budget as before: until the output outgrows it, the exact
//! prefix that fits (the reply when nothing is cut); from then on, the head (half the budget) and a rolling tail
//! trimmed to what its text alone costs: a little over half the budget, whatever bytes the command prints.

use std::collections::VecDeque;

use protocol::reply_text::BudgetedBytes;
use protocol::StreamKind;

use super::cut_cost::CutCost;
use crate::engine::{Capture, Sink};

/// Keep, of each of stdout and stderr, what its encoding in a JSON reply (escaped text, plus base64 when not UTF-8:
/// see `protocol::reply_text`) fits in `budget` bytes: all of it, or else the first and the last part with the cut
/// marked; read and drop the rest. What a reply holds is then bounded by its encoded size, whatever bytes the
/// command prints.
#[derive(Debug, Clone, Copy)]
pub struct ReplyCapture {
    pub budget: usize,
}

/// What a reply carries of one stream.
#[derive(Debug, Default, Clone)]
pub struct ReplyOutput {
    pub bytes: Vec<u8>,
    /// Bytes were dropped to fit the budget.
    pub truncated: bool,
    /// When `bytes` are a head and a tail: the head's length, the bytes before the marker, which are exactly the
    /// stream's first ones. A client writing a reply as it arrives counts only those as stream offsets
    /// (`protocol::OUTPUT_HEAD_HEADER`).
    pub head: Option<usize>,
}

impl Capture for ReplyCapture {
    type Sink = HeadTail;

    fn sink(&self, _kind: StreamKind) -> HeadTail {
        HeadTail::new(self.budget)
    }
}

impl Sink for HeadTail {
    type Kept = ReplyOutput;

    async fn take(&mut self, bytes: &[u8]) {
        self.push(bytes);
    }

    fn finish(self) -> ReplyOutput {
        self.into_reply_output()
    }
}

/// Head and tail of one stream within an encoded budget.
#[derive(Debug)]
pub struct HeadTail {
    budget: usize,
    phase: Phase,
    total: u64,
}

#[derive(Debug)]
enum Phase {
    /// Everything so far fits: the longest exact prefix within the whole budget.
    Whole(BudgetedBytes),
    /// The output outgrew the budget: the head, and the last pieces (each with what its text costs).
    Cut { head: Vec<u8>, tail: VecDeque<(Vec<u8>, usize)>, tail_cost: usize },
}

/// The text put where the middle was.
pub fn marker(dropped: u64) -> String {
    format!("\n[\u{2026} {dropped} bytes dropped \u{2026}]\n")
}

/// A lower bound of what `bytes` cost in a reply: their escaped length, each byte from 0x80 up counted as one (as
/// lossy text an invalid one costs more), plus, when they hold an invalid sequence, their share of the base64 that
/// the whole field then carries. A tail whose bound exceeds the room left can never fit whole, so its front can
/// go. Fast passes only (branch-free counting; UTF-8 validation stops at the first invalid byte): this runs on
/// every piece of a stream that outgrew the budget, however many gigabytes follow.
fn text_cost(bytes: &[u8]) -> usize {
    let escaped = protocol::json::escaped_len_of_bytes(bytes);
    match std::str::from_utf8(bytes) {
        // Invalid, not merely a character cut at the end of the piece.
        Err(err) if err.error_len().is_some() => escaped + bytes.len() * 4 / 3,
        _ => escaped,
    }
}

impl HeadTail {
    pub fn new(budget: usize) -> Self {
        HeadTail { budget, phase: Phase::Whole(BudgetedBytes::new(budget)), total: 0 }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let before = self.total;
        self.total += bytes.len() as u64;
        match &mut self.phase {
            Phase::Whole(prefix) => {
                // A character left unfinished at the end of the last piece may be cut off with this one: its
                // bytes (at most 3) must still reach the tail.
                let unfinished = prefix.kept()[prefix.kept().len().saturating_sub(3)..].to_vec();
                prefix.push(bytes);
                if prefix.is_truncated() {
                    // The prefix holds the stream up to `kept`; the rest starts the tail.
                    let kept = prefix.kept().len() as u64;
                    let rest = if kept >= before {
                        bytes[usize::try_from(kept - before).unwrap_or(bytes.len()).min(bytes.len())..].to_vec()
                    } else {
                        let lost = usize::try_from(before - kept).unwrap_or(0).min(unfinished.len());
                        [&unfinished[unfinished.len() - lost..], bytes].concat()
                    };
                    self.cut(&rest);
                }
            }
            Phase::Cut { .. } => self.push_tail(bytes),
        }
    }

    /// From whole to cut: the head is the half-budget prefix of what was kept; the tail starts with the end of it.
    fn cut(&mut self, rest: &[u8]) {
        let Phase::Whole(prefix) = std::mem::replace(&mut self.phase, Phase::Whole(BudgetedBytes::new(0))) else {
            return;
        };
        let mut head = BudgetedBytes::new(self.budget / 2);
        head.push(prefix.kept());
        let seed_from = prefix.kept().len().saturating_sub(self.budget / 2 + 8);
        let seed = prefix.kept()[seed_from..].to_vec();
        drop(prefix);
        let (head, _) = head.finish();
        self.phase = Phase::Cut { head, tail: VecDeque::new(), tail_cost: 0 };
        self.push_tail(&seed);
        self.push_tail(rest);
    }

    fn push_tail(&mut self, bytes: &[u8]) {
        let Phase::Cut { tail, tail_cost, .. } = &mut self.phase else { return };
        if bytes.is_empty() {
            return;
        }
        let cost = text_cost(bytes);
        tail.push_back((bytes.to_vec(), cost));
        *tail_cost += cost;
        // Keep the last pieces whose cost is at least the room a tail can get (a little over half the budget).
        let room = self.budget / 2 + 1024;
        while let Some((_, front)) = tail.front() {
            if tail.len() > 1 && *tail_cost - front >= room {
                *tail_cost -= front;
                tail.pop_front();
            } else {
                break;
            }
        }
    }

    /// `bytes` bytes of the stream are not there (already dropped): they count, and force a cut.
    pub fn skip(&mut self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if matches!(self.phase, Phase::Whole(_)) {
            self.cut(&[]);
        }
        self.total += bytes;
        if let Phase::Cut { tail, tail_cost, .. } = &mut self.phase {
            tail.clear();
            *tail_cost = 0;
        }
    }

    /// Once the stream is cut: the length of the head, which [`HeadTail::into_reply_output`] puts before the marker.
    fn head_len(&self) -> Option<usize> {
        match &self.phase {
            Phase::Whole(_) => None,
            Phase::Cut { head, .. } => Some(head.len()),
        }
    }

    /// What a reply carries: the bytes, whether any were dropped, and where the head ends.
    pub fn into_reply_output(self) -> ReplyOutput {
        let head = self.head_len();
        let (bytes, truncated) = self.into_bytes();
        ReplyOutput { bytes, truncated, head }
    }

    /// The bytes a reply carries, and whether any were dropped.
    fn into_bytes(self) -> (Vec<u8>, bool) {
        let (head, tail) = match self.phase {
            Phase::Whole(prefix) => return prefix.finish(),
            Phase::Cut { head, tail, .. } => (head, tail),
        };
        let tail: Vec<u8> = tail.into_iter().map(|(bytes, _)| bytes).collect::<Vec<_>>().concat();
        // The tail never reaches back into the head.
        let after_head = usize::try_from(self.total - head.len() as u64).unwrap_or(usize::MAX);
        let first = tail.len().saturating_sub(after_head);
        let total = self.total;
        let marker_at = |start: usize| marker(total - head.len() as u64 - (tail.len() - start) as u64);
        let cut = |start: usize| [&head[..], marker_at(start).as_bytes(), &tail[start..]].concat();
        // The longest suffix that fits with the head and the marker: the cost falls as the suffix shrinks. Each step
        // asks what the cut would cost, measured without building it (one pass over the tail in all).
        let cost = CutCost::new(&head, &tail, first);
        let (mut low, mut high) = (first, tail.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if cost.of(mid, &marker_at(mid)) <= self.budget {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        let mut start = low;
        // Start on a character, not inside one (it would cost the whole reply its base64).
        while start < tail.len() && (tail[start] & 0xC0) == 0x80 && start - low < 3 {
            start += 1;
        }
        (cut(start), true)
    }
}

#[cfg(test)]
mod tests {
    use protocol::reply_text::encoded_len;

    use super::*;

    fn keep(budget: usize, input: &[u8], piece: usize) -> (Vec<u8>, bool) {
        let mut kept = HeadTail::new(budget);
        for chunk in input.chunks(piece.max(1)) {
            kept.push(chunk);
        }
        kept.into_bytes()
    }

    #[test]
    fn output_that_fits_is_kept_whole() {
        let input = b"hello\nworld\n".repeat(10);
        assert_eq!(keep(1000, &input, 7), (input.clone(), false));
        assert_eq!(keep(encoded_len(&input), &input, 1), (input.clone(), false));
        assert!(keep(encoded_len(&input) - 1, &input, 1).1);
    }

    #[test]
    fn larger_output_keeps_head_and_tail_with_the_cut_marked() {
        let input: Vec<u8> = (0..10_000).flat_map(|i: u32| format!("line {i}\n").into_bytes()).collect();
        let (kept, truncated) = keep(1000, &input, 333);
        assert!(truncated);
        assert!(encoded_len(&kept) <= 1000 && encoded_len(&kept) > 950, "{}", encoded_len(&kept));
        let text = String::from_utf8(kept).unwrap();
        let (head, rest) = text.split_once("\n[\u{2026} ").unwrap();
        let (count, tail) = rest.split_once(" bytes dropped \u{2026}]\n").unwrap();
        assert!(input.starts_with(head.as_bytes()) && input.ends_with(tail.as_bytes()));
        assert_eq!(head.len() + tail.len() + count.parse::<usize>().unwrap(), input.len());
        assert!((490..=500).contains(&encoded_len(head.as_bytes())), "{}", encoded_len(head.as_bytes()));
        assert!(tail.ends_with("line 9999\n"));
    }

    #[test]
    fn encoded_cost_is_what_counts() {
        let input: Vec<u8> = (0..5000u32).map(|i| if i % 3 == 0 { 1 } else { 0xff }).collect();
        let (kept, truncated) = keep(2000, &input, 100);
        assert!(truncated);
        assert!(encoded_len(&kept) <= 2000, "{}", encoded_len(&kept));
        assert!(encoded_len(&kept) > 1700, "{}", encoded_len(&kept));
    }

    /// Whatever the piece sizes and bytes: head and tail are exact ends of the input, the marker counts the rest,
    /// the cost fits the budget.
    #[test]
    fn head_and_tail_are_exact_for_any_pieces() {
        let mut inputs = vec![
            "é".repeat(3000).into_bytes(),
            "ab€d\n".repeat(2000).into_bytes(),
            (0..20_000u32).map(|i| [b'a', 0xe2, 0x82, 0xac, 0xff, 1, b'\n'][i as usize % 7]).collect::<Vec<u8>>(),
        ];
        inputs.push((0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect());
        // Just over the smallest budget, so that the tail reaches back to where the prefix was cut.
        inputs.extend((151..160).map(|n| "é".repeat(n).into_bytes()));
        inputs.extend((101..110).map(|n| "€".repeat(n).into_bytes()));
        for input in &inputs {
            for piece in [1, 2, 3, 5, 64, 1000, 7777] {
                for budget in [300, 1001, 4096] {
                    if encoded_len(input) <= budget {
                        continue;
                    }
                    let (kept, truncated) = keep(budget, input, piece);
                    assert!(truncated && encoded_len(&kept) <= budget, "piece {piece} budget {budget}");
                    let open = "\n[\u{2026} ".as_bytes();
                    let at = kept.windows(open.len()).rposition(|w| w == open).unwrap();
                    let rest = &kept[at + open.len()..];
                    let close = " bytes dropped \u{2026}]\n".as_bytes();
                    let end = rest.windows(close.len()).position(|w| w == close).unwrap();
                    let dropped: usize = std::str::from_utf8(&rest[..end]).unwrap().parse().unwrap();
                    let (head, tail) = (&kept[..at], &rest[end + close.len()..]);
                    assert!(input.starts_with(head) && input.ends_with(tail), "piece {piece} budget {budget}");
                    assert_eq!(head.len() + dropped + tail.len(), input.len());
                    assert!(encoded_len(&kept) * 10 >= budget * 4, "too little kept: {}", encoded_len(&kept));
                }
            }
        }
    }

    #[test]
    fn a_gap_forces_a_cut_and_is_counted() {
        let mut kept = HeadTail::new(1000);
        kept.push(b"start\n");
        kept.skip(500);
        kept.push(b"end\n");
        let (bytes, truncated) = kept.into_bytes();
        assert!(truncated);
        assert_eq!(String::from_utf8(bytes).unwrap(), "start\n\n[\u{2026} 500 bytes dropped \u{2026}]\nend\n");
    }
}
