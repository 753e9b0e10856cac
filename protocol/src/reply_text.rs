//! Bytes as a `/exec` reply carries them (see [`crate::text`]): a JSON string of their lossy text (each invalid
//! UTF-8 sequence becomes one U+FFFD), escaped, plus their base64 when they are not valid UTF-8.
//!
//! That encoding can be far larger than the bytes (a control byte is `\u0001`, six bytes; an invalid byte is three
//! bytes of U+FFFD plus its base64), so a cap on raw bytes does not bound a reply. [`BudgetedBytes`] measures the
//! encoded cost while output arrives and keeps the longest prefix that fits a budget of encoded bytes;
//! [`LossyText`] writes the text in pieces, so a reply is streamed from the kept bytes and never built whole.

use crate::json::{escaped_len, write_escaped};
use crate::text::utf8_chunks;

/// U+FFFD, the text of one invalid sequence.
const REPLACEMENT: &str = "\u{FFFD}";

/// The length of the (padded) base64 of `len` bytes.
pub fn base64_len(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// What `bytes` cost in a reply: their escaped lossy text, plus their base64 when they are not valid UTF-8.
pub fn encoded_len(bytes: &[u8]) -> usize {
    let text: usize = utf8_chunks(bytes)
        .map(|chunk| escaped_len(chunk.valid()) + if chunk.invalid().is_empty() { 0 } else { REPLACEMENT.len() })
        .sum();
    text + if std::str::from_utf8(bytes).is_ok() { 0 } else { base64_len(bytes.len()) }
}

/// Whether `invalid` (a maximal invalid piece at the end of the input) is the start of a sequence that more bytes
/// could complete, rather than bytes no continuation can make valid.
fn incomplete(invalid: &[u8]) -> bool {
    std::str::from_utf8(invalid).is_err_and(|err| err.error_len().is_none())
}

/// The longest prefix of a stream of bytes whose reply encoding ([`encoded_len`]) fits a budget.
///
/// The cost is counted once the bytes come near the budget, each byte once: a run of valid text costs its escaped
/// length, an invalid sequence the three bytes of U+FFFD, and once any invalid sequence is kept, every kept byte
/// also costs its share of the base64. A sequence split across two pushes waits for its end. When the next piece does
/// not fit, the kept bytes end before it and everything after is dropped, so what is kept is always an exact prefix:
/// the first invalid sequence that would not fit with the base64 it brings leaves the prefix before it, valid text
/// without base64.
#[derive(Debug, Clone)]
pub struct BudgetedBytes {
    bytes: Vec<u8>,
    budget: usize,
    /// The escaped length of the lossy text of `bytes[..decoded]`.
    text_cost: usize,
    /// `bytes[decoded..]` is the start of a sequence still waiting for its next bytes (at most 3 bytes).
    decoded: usize,
    /// `bytes[..decoded]` is valid UTF-8.
    valid: bool,
    /// Bytes were dropped.
    truncated: bool,
}

impl BudgetedBytes {
    pub fn new(budget: usize) -> Self {
        BudgetedBytes { bytes: Vec::new(), budget, text_cost: 0, decoded: 0, valid: true, truncated: false }
    }

    /// Keeps as much of `chunk` as fits; once anything was dropped, keeps nothing more.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.truncated || chunk.is_empty() {
            return;
        }
        // Every kept byte costs at least one encoded byte: no more than the budget left can be kept, so the buffer
        // never grows beyond the budget.
        let spent = self.cost(self.text_cost, self.decoded, self.valid) + (self.bytes.len() - self.decoded);
        let take = chunk.len().min(self.budget.saturating_sub(spent));
        if take < chunk.len() {
            self.truncated = true;
        }
        let needed = self.bytes.len() + take;
        if needed > self.bytes.capacity() {
            let want = needed.max(self.bytes.capacity() * 2).min(self.budget).max(needed);
            self.bytes.reserve_exact(want - self.bytes.len());
        }
        self.bytes.extend_from_slice(&chunk[..take]);
        if self.truncated || self.most_it_can_cost() > self.budget {
            self.decode(false);
        }
    }

    /// A bound on what the kept bytes cost, without looking at those not counted yet: none costs more than six in
    /// the text (`\u0001`), and the base64 is at most that of all of them. While it fits the budget, counting can
    /// wait: most output is far smaller than the budget and is never counted at all.
    fn most_it_can_cost(&self) -> usize {
        let uncounted = self.bytes.len() - self.decoded;
        self.text_cost + 6 * uncounted + base64_len(self.bytes.len())
    }

    /// The kept bytes and whether any were dropped. A sequence left unfinished at the end is kept as invalid (it
    /// is how the output ended) unless bytes after it were dropped (then it is where the cut fell, and goes too).
    pub fn finish(mut self) -> (Vec<u8>, bool) {
        if self.truncated || self.most_it_can_cost() > self.budget {
            self.decode(true);
        }
        (self.bytes, self.truncated)
    }

    /// Whether bytes were dropped already (nothing more will be kept).
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The bytes kept so far: an exact prefix of the input (a last sequence may still be unfinished).
    pub fn kept(&self) -> &[u8] {
        &self.bytes
    }

    /// What the kept bytes cost encoded so far (a sequence still waiting for its end not counted).
    pub fn encoded_len(&self) -> usize {
        self.cost(self.text_cost, self.decoded, self.valid)
    }

    fn cost(&self, text_cost: usize, len: usize, valid: bool) -> usize {
        text_cost + if valid { 0 } else { base64_len(len) }
    }

    /// Counts the bytes after `decoded`, up to a sequence still waiting for its end (unless `at_end`); cuts at the
    /// first piece that does not fit.
    fn decode(&mut self, at_end: bool) {
        let fits = |text_cost: usize, len: usize, valid: bool| self.cost(text_cost, len, valid) <= self.budget;
        let (mut pos, mut text_cost, mut valid) = (self.decoded, self.text_cost, self.valid);
        let mut cut = None;
        for chunk in utf8_chunks(&self.bytes[self.decoded..]) {
            let text = chunk.valid();
            let cost = escaped_len(text);
            if fits(text_cost + cost, pos + text.len(), valid) {
                text_cost += cost;
                pos += text.len();
            } else {
                for ch in text.chars() {
                    let cost = escaped_len(ch.encode_utf8(&mut [0; 4]));
                    if !fits(text_cost + cost, pos + ch.len_utf8(), valid) {
                        break;
                    }
                    text_cost += cost;
                    pos += ch.len_utf8();
                }
                cut = Some(pos);
                break;
            }
            let invalid = chunk.invalid();
            if invalid.is_empty() {
                continue;
            }
            if pos + invalid.len() == self.bytes.len() && incomplete(invalid) {
                if !at_end {
                    break;
                }
                if self.truncated {
                    cut = Some(pos);
                    break;
                }
            }
            if !fits(text_cost + REPLACEMENT.len(), pos + invalid.len(), false) {
                cut = Some(pos);
                break;
            }
            text_cost += REPLACEMENT.len();
            pos += invalid.len();
            valid = false;
        }
        (self.decoded, self.text_cost, self.valid) = (pos, text_cost, valid);
        if let Some(cut) = cut {
            self.bytes.truncate(cut);
            self.truncated = true;
        }
    }
}

/// Writes the escaped lossy text of some bytes piece by piece: the same bytes as [`write_escaped`] of
/// `String::from_utf8_lossy(bytes)`, without building either.
#[derive(Debug, Default)]
pub struct LossyText {
    pos: usize,
}

impl LossyText {
    /// Appends the text of the next `max` bytes or so of `bytes` (always the same `bytes`) to `out`; false once
    /// everything was written. A sequence that may continue past the piece is left for the next call.
    pub fn write_next(&mut self, bytes: &[u8], max: usize, out: &mut Vec<u8>) -> bool {
        let end = (self.pos + max.max(4)).min(bytes.len());
        let piece = &bytes[self.pos..end];
        let more = end < bytes.len();
        let mut used = 0;
        for chunk in utf8_chunks(piece) {
            write_escaped(out, chunk.valid());
            used += chunk.valid().len();
            let invalid = chunk.invalid();
            if invalid.is_empty() {
                continue;
            }
            if more && used + invalid.len() == piece.len() && incomplete(invalid) {
                break;
            }
            out.extend_from_slice(REPLACEMENT.as_bytes());
            used += invalid.len();
        }
        self.pos += used;
        self.pos < bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy_escaped(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_escaped(&mut out, &String::from_utf8_lossy(bytes));
        out
    }

    fn samples() -> Vec<Vec<u8>> {
        let mut samples: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"plain text\n".to_vec(),
            "ünïcode ✓ 😀".as_bytes().to_vec(),
            vec![1; 100],
            vec![0xff; 100],
            b"\xe2\x82\x41\xe2\x28\xf0\x9f\x98".to_vec(),
            b"ok \xc3".to_vec(),
            "😀".repeat(50).into_bytes(),
        ];
        let mut state = 7u64;
        for len in [10, 333, 5000] {
            samples.push(
                (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Mostly text with some control and invalid bytes, and whole multi-byte characters.
                        [b'a', b'\n', 1, 0xff, 0xc3, 0xa9, b'"', 0xe2, 0x82, 0xac][(state % 10) as usize]
                    })
                    .collect(),
            );
        }
        samples
    }

    #[test]
    fn pieces_write_exactly_the_lossy_text() {
        for bytes in samples() {
            for max in [1, 4, 5, 7, 64] {
                let (mut text, mut out) = (LossyText::default(), Vec::new());
                while text.write_next(&bytes, max, &mut out) {}
                assert_eq!(out, lossy_escaped(&bytes), "{bytes:?} in pieces of {max}");
            }
        }
    }

    /// The prefix kept is the longest one (cut only between sequences) whose encoding fits, and its cost is exact.
    #[test]
    fn the_kept_prefix_is_the_longest_that_fits() {
        for bytes in samples() {
            for budget in [0, 1, 3, 6, 10, 50, 99, 400, 1000, 100_000] {
                for piece in [1, 3, 64, 100_000] {
                    let mut kept = BudgetedBytes::new(budget);
                    for chunk in bytes.chunks(piece) {
                        kept.push(chunk);
                    }
                    kept.decode(true);
                    let cost = kept.encoded_len();
                    let (prefix, truncated) = kept.finish();
                    let context = format!("{bytes:?} budget {budget} pieces of {piece}");
                    assert!(bytes.starts_with(&prefix), "{context}");
                    assert_eq!(truncated, prefix.len() < bytes.len(), "{context}");
                    assert!(encoded_len(&prefix) <= budget, "{context}: {} > {budget}", encoded_len(&prefix));
                    if !truncated {
                        assert_eq!(cost, encoded_len(&prefix), "{context}");
                    } else {
                        // The next character, or invalid sequence, would not have fitted.
                        let rest = bytes[prefix.len()..].utf8_chunks().next().unwrap();
                        let next = match rest.valid().chars().next() {
                            Some(ch) => ch.len_utf8(),
                            None => rest.invalid().len(),
                        };
                        let longer = &bytes[..prefix.len() + next];
                        assert!(encoded_len(longer) > budget, "{context}: {} bytes would fit", longer.len());
                    }
                }
            }
        }
    }

    #[test]
    fn control_bytes_count_six_and_invalid_bytes_their_base64_too() {
        let mut kept = BudgetedBytes::new(600);
        kept.push(&[1; 1000]);
        let (bytes, truncated) = kept.finish();
        assert_eq!((bytes.len(), truncated), (100, true));
        let mut kept = BudgetedBytes::new(13);
        kept.push(&[0xff; 1000]);
        let (bytes, truncated) = kept.finish();
        assert_eq!((bytes.len(), truncated), (3, true), "3 × U+FFFD and 4 bytes of base64 fit 13, a fourth not");
        // Text followed by an invalid byte whose base64 would not fit: the valid text stays, alone.
        let mut kept = BudgetedBytes::new(10);
        kept.push(b"abcdefgh\xff");
        assert_eq!(kept.finish(), (b"abcdefgh".to_vec(), true));
        // A character cut by the budget is not kept in part.
        let mut kept = BudgetedBytes::new(4);
        kept.push("abc€".as_bytes());
        assert_eq!(kept.finish(), (b"abc".to_vec(), true));
    }
}
