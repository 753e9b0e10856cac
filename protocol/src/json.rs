//! Kept over serde_json on the A/B that `bench/ab-json.sh` reruns (BENCHMARKS.md, "Hand-written JSON against
//! serde_json"): on 64 MiB of text serde_json was slower by 88% writing frames, 60% writing a reply and 93% reading
//! one; the narrowest gap, 1%, is a reply of control-heavy text, where both sides mostly escape.
//!
//! A JSON string writer fast enough for bulk output: stream frames carry every byte a command prints, and
//! serde_json's byte-at-a-time escaping was the largest cost of streaming. (The client's reader of such strings is
//! sidecar-exec's `sidecar::json_string`.)

const LOW: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Marks (high bit of each byte) the bytes of `word` that are below 0x20, a `"` or a `\`: the bytes JSON must
/// escape. The lowest mark is always exact (borrows only spill upward, past a true match).
fn escape_marks(word: u64) -> u64 {
    let below_space = word.wrapping_sub(LOW * 0x20) & !word;
    let quote = word ^ (LOW * u64::from(b'"'));
    let backslash = word ^ (LOW * u64::from(b'\\'));
    let has_quote = quote.wrapping_sub(LOW) & !quote;
    let has_backslash = backslash.wrapping_sub(LOW) & !backslash;
    (below_space | has_quote | has_backslash) & HIGH
}

/// How JSON escapes each byte: 0 not at all, `u` as `\u00XX`, else `\` and this letter (serde_json's table).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Appends `text` as a JSON string literal (quotes included) to `out`.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    write_escaped(out, text);
    out.push(b'"');
}

/// Appends the inside of `text`'s JSON string literal (no quotes) to `out`: for a string written in pieces.
pub fn write_escaped(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len());
    let mut start = 0;
    while let Some(i) = next_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..i]);
        let byte = bytes[i];
        let kind = ESCAPE[usize::from(byte)];
        if kind == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', kind]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Where the first byte from `from` on that JSON must escape is, if any: eight bytes at a time over plain text, so
/// that [`write_escaped`] and [`escaped_len`] walk text the same fast way.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
            let marks = escape_marks(word);
            if marks == 0 {
                i += 8;
                continue;
            }
            // Straight to the first byte that may need an escape.
            i += (marks.trailing_zeros() / 8) as usize;
        }
        if ESCAPE[usize::from(bytes[i])] != 0 {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// How many bytes [`write_escaped`] writes for `text`: what the text costs inside a JSON string.
pub fn escaped_len(text: &str) -> usize {
    escaped_len_words(text.as_bytes())
}

/// [`escaped_len`] of any bytes, each byte from 0x80 up counted as one: exact for UTF-8, and a lower bound of what
/// other bytes cost as lossy text (an invalid sequence becomes U+FFFD, three bytes). One branch-free pass (the
/// compiler vectorizes it), as fast on control bytes as on text, and no validation.
pub fn escaped_len_of_bytes(bytes: &[u8]) -> usize {
    bytes
        .chunks(1 << 16)
        .map(|piece| {
            let extra: u32 = piece
                .iter()
                .map(|&b| {
                    let control = u32::from(b < 0x20);
                    let short = u32::from(matches!(b, b'\n' | b'\r' | b'\t' | 0x08 | 0x0c));
                    let quote = u32::from(b == b'"' || b == b'\\');
                    5 * control - 4 * short + quote
                })
                .sum();
            piece.len() + extra as usize
        })
        .sum()
}

/// The byte-by-byte form of [`escaped_len_of_bytes`], with a fast path for runs of plain text.
fn escaped_len_words(bytes: &[u8]) -> usize {
    let mut len = bytes.len();
    let mut from = 0;
    while let Some(i) = next_escape(bytes, from) {
        len += escape_extra(bytes[i]);
        from = i + 1;
    }
    len
}

/// The bytes an escape adds to one byte of text: 1 for the two-character escapes, 5 for `\u00XX`.
fn escape_extra(byte: u8) -> usize {
    match ESCAPE[usize::from(byte)] {
        0 => 0,
        b'u' => 5,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_escaped_lengths_agree() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let text = "a\"b\\c\n\t\u{1}é€ plain text and more plain text";
        assert_eq!(escaped_len_of_bytes(text.as_bytes()), escaped_len(text));
        let words = escaped_len_words(&bytes);
        assert_eq!(escaped_len_of_bytes(&bytes), words);
    }

    use super::*;

    fn round_trip(text: &str) {
        let mut out = Vec::new();
        write_str(&mut out, text);
        let back: String = serde_json::from_slice(&out).unwrap();
        assert!(back == text, "round trip changed {text:?}");
        assert!(out == serde_json::to_vec(text).unwrap(), "not the bytes serde_json writes for {text:?}");
    }

    #[test]
    fn escapes_exactly_like_serde_json() {
        for text in ["", "plain", "a\"b\\c", "tab\tcr\rlf\n", "\u{0}\u{1f}\u{7f}", "ünï ✓ 😀", "12345678\n12345678\""]
        {
            round_trip(text);
        }
        let every_char: String = (0u32..0x800).filter_map(char::from_u32).collect();
        round_trip(&every_char);
        let long: String = "abcdefg\u{1}".repeat(1000);
        round_trip(&long);
    }

    #[test]
    fn escaped_len_is_what_write_escaped_writes() {
        let every_char: String = (0u32..0x800).filter_map(char::from_u32).collect();
        for text in
            ["", "plain", "a\"b\\c", "tab\tcr\rlf\n", "\u{0}\u{1f}\u{7f}", "ünï ✓", &every_char, &"x\u{1}".repeat(99)]
        {
            let mut out = Vec::new();
            write_escaped(&mut out, text);
            assert_eq!(escaped_len(text), out.len(), "{text:?}");
        }
    }

    #[test]
    fn the_word_test_finds_every_special_byte_in_every_position() {
        for position in 0..8 {
            for special in [0u8, 0x1f, b'"', b'\\', b'\n'] {
                let mut word = [b'a'; 8];
                word[position] = special;
                let marks = escape_marks(u64::from_le_bytes(word));
                assert_eq!(marks.trailing_zeros() / 8, position as u32, "{special} at {position}");
            }
            let mut word = [b'a'; 8];
            word[position] = 0xc3;
            assert_eq!(escape_marks(u64::from_le_bytes(word)), 0);
        }
    }
}
