//! What a `/exec` reply keeps of a stream larger than `--max-output`: the first and the last part (build errors are
//! at the end), half the budget each, with the cut marked in place: `\n[… N bytes dropped …]\n`.
//!
//! The budget counts encoded bytes, as the reply carries them (escaped text, plus base64 when not UTF-8: see
//! `protocol::reply_text`). Memory stays bounded: the exact prefix that fits the budget (as before) plus a rolling
//! tail of half the budget in raw bytes (no kept byte costs less than one encoded byte, so no more can fit).

use std::collections::VecDeque;

use protocol::reply_text::{encoded_len, BudgetedBytes};

/// Head and tail of one stream within an encoded budget.
#[derive(Debug)]
pub struct HeadTail {
    budget: usize,
    /// The longest exact prefix that fits the whole budget: the reply when nothing is cut.
    prefix: BudgetedBytes,
    /// The last bytes seen (at most `tail_room`), for the tail of a cut reply.
    tail: VecDeque<u8>,
    tail_room: usize,
    total: u64,
    /// Bytes were skipped (a named run's dropped middle): the reply is cut whatever its size.
    gap: bool,
}

/// The text put where the middle was.
pub fn marker(dropped: u64) -> String {
    format!("\n[\u{2026} {dropped} bytes dropped \u{2026}]\n")
}

impl HeadTail {
    pub fn new(budget: usize) -> Self {
        let tail_room = budget / 2 + 8;
        HeadTail { budget, prefix: BudgetedBytes::new(budget), tail: VecDeque::new(), tail_room, total: 0, gap: false }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if !self.gap {
            self.prefix.push(bytes);
        }
        let keep = bytes.len().min(self.tail_room);
        self.tail.extend(&bytes[bytes.len() - keep..]);
        let excess = self.tail.len().saturating_sub(self.tail_room);
        self.tail.drain(..excess);
    }

    /// `bytes` bytes of the stream are not there (already dropped): they count, and force a cut.
    pub fn skip(&mut self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.total += bytes;
        self.gap = true;
        self.tail.clear();
    }

    /// Every byte seen, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The bytes a reply carries, and whether any were dropped.
    pub fn finish(self) -> (Vec<u8>, bool) {
        let (prefix, truncated) = self.prefix.finish();
        if !truncated && !self.gap {
            return (prefix, false);
        }
        let half = self.budget / 2;
        let mut head_part = BudgetedBytes::new(half);
        head_part.push(&prefix);
        let (head, _) = head_part.finish();
        let tail: Vec<u8> = self.tail.into();
        // The tail never reaches back into the head.
        let after_head = usize::try_from(self.total - head.len() as u64).unwrap_or(usize::MAX);
        let mut start = tail.len().saturating_sub(after_head);
        let cut = |start: usize| {
            let dropped = self.total - head.len() as u64 - (tail.len() - start) as u64;
            [&head[..], marker(dropped).as_bytes(), &tail[start..]].concat()
        };
        // The longest suffix that fits with the head and the marker: the cost falls as the suffix shrinks.
        let (mut low, mut high) = (start, tail.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if encoded_len(&cut(mid)) <= self.budget {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        start = low;
        // Start on a character, not inside one (it would cost the whole reply its base64).
        while start < tail.len() && (tail[start] & 0xC0) == 0x80 && start - low < 3 {
            start += 1;
        }
        (cut(start), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(budget: usize, input: &[u8], piece: usize) -> (Vec<u8>, bool) {
        let mut kept = HeadTail::new(budget);
        for chunk in input.chunks(piece.max(1)) {
            kept.push(chunk);
        }
        kept.finish()
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

    #[test]
    fn a_gap_forces_a_cut_and_is_counted() {
        let mut kept = HeadTail::new(1000);
        kept.push(b"start\n");
        kept.skip(500);
        kept.push(b"end\n");
        let (bytes, truncated) = kept.finish();
        assert!(truncated);
        assert_eq!(String::from_utf8(bytes).unwrap(), "start\n\n[\u{2026} 500 bytes dropped \u{2026}]\nend\n");
    }
}
