//! What a cut reply field costs in the reply (`protocol::reply_text::encoded_len` of head, marker and a suffix of the
//! tail) for any start of the suffix, without building it: the cut's search asks about two dozen starts of a
//! tail of up to `--max-output` bytes, and building and measuring each (as it once did) cost a debug server over 5 s
//! of CPU for one 16 MiB reply.
//!
//! Why it can be measured in parts: the marker begins and ends with `\n`, and a byte that is not a UTF-8
//! continuation byte (`0x80..=0xBF`) is where every decoding of the bytes around it is at a boundary (no sequence,
//! valid or not, holds such a byte past its first). So the lossy text of head + marker + `tail[start..]` costs what
//! each part costs alone, and `tail[start..]` costs what its leading continuation bytes cost (each is one invalid
//! sequence, one U+FFFD) plus what the tail costs from the first other byte on, which one pass over the tail gives
//! for every such byte through checkpoints every [`BLOCK`] bytes (the rest of a block is decoded per question).

use protocol::json::escaped_len;
use protocol::reply_text::base64_len;
use protocol::text::utf8_chunks;

/// Tail bytes between checkpoints: a question decodes at most this many.
pub const BLOCK: usize = 64 * 1024;

/// The length of U+FFFD, the text of one invalid sequence.
const REPLACEMENT_LEN: usize = 3;

/// The costs of one head and one tail, to ask what `head + marker + tail[start..]` costs for any `start`.
#[derive(Debug)]
pub struct CutCost<'a> {
    tail: &'a [u8],
    block: usize,
    head_text: usize,
    head_len: usize,
    head_valid: bool,
    /// The first boundary (non-continuation byte, or the end) at or after the first start asked about.
    origin: usize,
    /// Every `block` bytes from `origin`: the first boundary at or after it, and the cost of the tail from `origin`
    /// up to there.
    checkpoints: Vec<(usize, usize)>,
    /// The cost of the tail from `origin` to its end.
    total: usize,
    /// Where the last invalid sequence of the tail from `origin` starts, if it has one.
    last_invalid: Option<usize>,
}

/// Whether `byte` can only continue a sequence.
fn continues(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The lossy text cost of `bytes` decoded alone, and where its last invalid sequence starts.
fn text_cost(bytes: &[u8]) -> (usize, Option<usize>) {
    let (mut cost, mut at, mut last_invalid) = (0, 0, None);
    for chunk in utf8_chunks(bytes) {
        cost += escaped_len(chunk.valid());
        at += chunk.valid().len();
        if !chunk.invalid().is_empty() {
            cost += REPLACEMENT_LEN;
            last_invalid = Some(at);
            at += chunk.invalid().len();
        }
    }
    (cost, last_invalid)
}

impl<'a> CutCost<'a> {
    /// The costs for starts from `first` on, checkpointed every [`BLOCK`] bytes.
    pub fn new(head: &[u8], tail: &'a [u8], first: usize) -> Self {
        Self::with_block(head, tail, first, BLOCK)
    }

    fn with_block(head: &[u8], tail: &'a [u8], first: usize, block: usize) -> Self {
        let (head_text, _) = text_cost(head);
        let boundary_from =
            |from: usize| from + tail[from..].iter().position(|b| !continues(*b)).unwrap_or(tail.len() - from);
        let origin = boundary_from(first.min(tail.len()));
        let mut checkpoints = vec![(origin, 0)];
        let (mut at, mut cost, mut last_invalid) = (origin, 0, None);
        let mut next = origin;
        while next < tail.len() {
            next = (next + block).min(tail.len());
            // A run of continuation bytes may reach past a block's start: its boundary is the one found already.
            let boundary = if at >= next { at } else { boundary_from(next) };
            let (piece, invalid) = text_cost(&tail[at..boundary]);
            if let Some(invalid) = invalid {
                last_invalid = Some(at + invalid);
            }
            cost += piece;
            at = boundary;
            checkpoints.push((boundary, cost));
        }
        CutCost {
            tail,
            block,
            head_text,
            head_len: head.len(),
            head_valid: std::str::from_utf8(head).is_ok(),
            origin,
            checkpoints,
            total: cost,
            last_invalid,
        }
    }

    /// What `head + marker + tail[start..]` costs in a reply (`marker`: valid text that begins and ends with `\n`),
    /// for `start` at or after the `first` given to [`CutCost::new`].
    pub fn of(&self, start: usize, marker: &str) -> usize {
        let len = self.head_len + marker.len() + (self.tail.len() - start);
        let (boundary, from_boundary, invalid_after) = self.rest_after(start);
        let text = self.head_text + escaped_len(marker) + REPLACEMENT_LEN * (boundary - start) + from_boundary;
        let valid = self.head_valid && boundary == start && !invalid_after;
        text + if valid { 0 } else { base64_len(len) }
    }

    /// For `start`: the first boundary at or after it, the cost of the tail from there, and whether an invalid
    /// sequence starts there or later.
    fn rest_after(&self, start: usize) -> (usize, usize, bool) {
        let block = start.saturating_sub(self.origin) / self.block;
        let (checkpoint, before) = self.checkpoints[block.min(self.checkpoints.len() - 1)];
        let block_end = (self.origin + (block + 1) * self.block).min(self.tail.len());
        let found = (start.max(self.origin)..block_end).find(|at| !continues(self.tail[*at]));
        let (boundary, cost_before) = match found {
            // Within the block: decode from its checkpoint up to it.
            Some(boundary) => (boundary, before + text_cost(&self.tail[checkpoint.max(self.origin)..boundary]).0),
            // None in the rest of the block: the next checkpoint's boundary is the first.
            None if start >= self.origin => match self.checkpoints.get(block + 1) {
                Some(&(boundary, cost)) => (boundary, cost),
                None => (self.tail.len(), self.total),
            },
            None => (self.origin, 0),
        };
        let invalid_after = self.last_invalid.is_some_and(|at| at >= boundary);
        (boundary, self.total - cost_before, invalid_after)
    }
}

#[cfg(test)]
mod tests {
    use protocol::reply_text::encoded_len;

    use super::*;

    /// For every start and several block sizes: exactly what building the cut and measuring it gives.
    #[test]
    fn every_start_costs_what_the_built_cut_costs() {
        let mut inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"plain text\n".repeat(20),
            "é€😀 ünïcode\n".repeat(10).into_bytes(),
            vec![0x80; 300],
            [b"ab".as_slice(), &[0x80; 200], "€".as_bytes(), &[0xbf; 150], b"\xe2\x82"].concat(),
            vec![1; 100],
            vec![0xff; 100],
            b"\xe2\x82\x41\xe2\x28\xf0\x9f\x98 x\"\\\t".repeat(20),
        ];
        let mut state = 11u64;
        inputs.push(
            (0..700)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    [b'a', b'\n', 1, 0xff, 0xc3, 0xa9, b'"', 0xe2, 0x82, 0xac, 0x80, 0xf0][(state % 12) as usize]
                })
                .collect(),
        );
        let heads: [&[u8]; 4] = [b"", b"head text\n", b"head \xe2\x82", "héad".as_bytes()];
        for tail in &inputs {
            for head in heads {
                for block in [1, 3, 7, BLOCK] {
                    for first in [0, 5, tail.len() / 2] {
                        let first = first.min(tail.len());
                        let cost = CutCost::with_block(head, tail, first, block);
                        for start in first..=tail.len() {
                            let marker = format!("\n[\u{2026} {start} bytes dropped \u{2026}]\n");
                            let built = [head, marker.as_bytes(), &tail[start..]].concat();
                            assert_eq!(
                                cost.of(start, &marker),
                                encoded_len(&built),
                                "head {head:?} first {first} start {start} block {block} tail of {}",
                                tail.len()
                            );
                        }
                    }
                }
            }
        }
    }
}
