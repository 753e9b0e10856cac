//! Kept over serde_json on the A/B that `bench/ab-json.sh` reruns (BENCHMARKS.md, "Hand-written JSON against
//! serde_json"): on 64 MiB of text serde_json took 30-50% longer to write frames and replies and twice as long to
//! read a reply; the narrowest gap, 5-6%, is binary frames with the lossy twin, where both sides mostly build it.
//!
//! A JSON string writer fast enough for bulk output: stream frames carry every byte a command prints, and
//! serde_json's byte-at-a-time escaping was the largest cost of streaming. And its reader for the one large string a
//! blocking reply holds, decoded as it arrives instead of built as a String.

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
    let mut i = 0;
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
            let marks = escape_marks(word);
            if marks == 0 {
                i += 8;
                continue;
            }
            // Jump straight to the first byte to escape.
            i += (marks.trailing_zeros() / 8) as usize;
        }
        let byte = bytes[i];
        let kind = ESCAPE[usize::from(byte)];
        if kind == 0 {
            i += 1;
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
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
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
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
    let mut i = 0;
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let word = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
            let marks = escape_marks(word);
            if marks == 0 {
                i += 8;
                continue;
            }
            // Straight to the first byte to escape, as `write_escaped` does.
            i += (marks.trailing_zeros() / 8) as usize;
        }
        len += escape_extra(bytes[i]);
        i += 1;
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

/// Why a JSON string could not be read: not a string, or an escape JSON does not have (a lone surrogate included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidString;

/// The longest escape: a surrogate pair, `\uD83D\uDE00`.
const LONGEST_ESCAPE: usize = 12;

/// Decodes the inside of a JSON string literal as it arrives, in pieces cut anywhere (inside an escape too): the
/// runs between escapes are copied as they are, found with memchr. Lenient in one way only: a raw control byte
/// (which JSON forbids in a string) is kept as it is, not refused.
#[derive(Debug, Default)]
pub struct StringDecoder {
    /// The start of an escape cut by the end of the last piece.
    carry: Vec<u8>,
}

impl StringDecoder {
    /// Appends the text of `piece` (the literal's inside, continuing) to `out`. `Some(n)`: the closing quote is at
    /// `piece[n]` and the string ends there (nothing after it was read).
    pub fn feed(&mut self, piece: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, InvalidString> {
        let mut pos = 0;
        if !self.carry.is_empty() {
            let held = self.carry.len();
            let take = (LONGEST_ESCAPE - held).min(piece.len());
            self.carry.extend_from_slice(&piece[..take]);
            match escape(&self.carry, out)? {
                Some(len) => pos = len - held,
                None if self.carry.len() < LONGEST_ESCAPE => return Ok(None),
                None => return Err(InvalidString),
            }
            self.carry.clear();
        }
        while let Some(offset) = memchr::memchr2(b'\\', b'"', &piece[pos..]) {
            let at = pos + offset;
            out.extend_from_slice(&piece[pos..at]);
            if piece[at] == b'"' {
                return Ok(Some(at));
            }
            match escape(&piece[at..], out)? {
                Some(len) => pos = at + len,
                None => {
                    self.carry.extend_from_slice(&piece[at..]);
                    return Ok(None);
                }
            }
        }
        out.extend_from_slice(&piece[pos..]);
        Ok(None)
    }
}

/// Decodes the escape at the start of `bytes` (which starts with `\`) into `out` and returns its length; `None`
/// when `bytes` ends before the escape does.
fn escape(bytes: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, InvalidString> {
    let Some(&kind) = bytes.get(1) else { return Ok(None) };
    let byte = match kind {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'n' => b'\n',
        b't' => b'\t',
        b'r' => b'\r',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'u' => {
            let Some((ch, len)) = unicode_escape(bytes)? else { return Ok(None) };
            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
            return Ok(Some(len));
        }
        _ => return Err(InvalidString),
    };
    out.push(byte);
    Ok(Some(2))
}

/// The character of a `\uXXXX` escape (two of them for a surrogate pair) at the start of `bytes`, and how many bytes
/// it took; `None` when `bytes` ends before it does.
fn unicode_escape(bytes: &[u8]) -> Result<Option<(char, usize)>, InvalidString> {
    let hex = |at: usize| -> Result<Option<u32>, InvalidString> {
        let Some(digits) = bytes.get(at..at + 4) else {
            // Cut short: fine so far if what there is could still be hex digits.
            return if bytes[at.min(bytes.len())..].iter().all(u8::is_ascii_hexdigit) {
                Ok(None)
            } else {
                Err(InvalidString)
            };
        };
        let value = digits.iter().try_fold(0u32, |value, &digit| {
            char::from(digit).to_digit(16).map(|digit| value * 16 + digit).ok_or(InvalidString)
        })?;
        Ok(Some(value))
    };
    let Some(first) = hex(2)? else { return Ok(None) };
    if (0xD800..0xDC00).contains(&first) {
        match bytes.get(6..8) {
            None if bytes.len() == 6 || bytes.get(6..) == Some(b"\\") => return Ok(None),
            Some(b"\\u") => {}
            _ => return Err(InvalidString),
        }
        let Some(second) = hex(8)? else { return Ok(None) };
        if !(0xDC00..0xE000).contains(&second) {
            return Err(InvalidString);
        }
        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
        return Ok(Some((char::from_u32(code).ok_or(InvalidString)?, 12)));
    }
    Ok(Some((char::from_u32(first).ok_or(InvalidString)?, 6)))
}

/// The text of a whole JSON string literal (`"…"`, quotes included, as serde_json's `RawValue` holds it), appended
/// to `out`.
pub fn unescape_into(literal: &[u8], out: &mut Vec<u8>) -> Result<(), InvalidString> {
    let inner = literal.strip_prefix(b"\"").ok_or(InvalidString)?;
    match StringDecoder::default().feed(inner, out)? {
        Some(end) if end + 1 == inner.len() => Ok(()),
        _ => Err(InvalidString),
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

    /// Every string, whole and cut into pieces at every position, decodes to what serde_json reads.
    #[test]
    fn decoding_reads_what_serde_json_reads_however_it_is_cut() {
        let every_char: String = (0u32..0x800).filter_map(char::from_u32).chain(['😀', '\u{10ffff}']).collect();
        let mut literals: Vec<String> =
            ["", "plain", "a\"b\\c/", "tab\tcr\rlf\n\u{8}\u{c}", "\u{0}\u{1f}\u{7f}", &every_char]
                .iter()
                .map(|text| serde_json::to_string(text).unwrap())
                .collect();
        // Escapes serde_json does not write but other servers may.
        literals.extend([r#""\/\u00e9\ud83d\ude00\u0041x""#, r#""\uD83D\uDE00""#].map(String::from));
        for literal in &literals {
            let expected = serde_json::from_str::<String>(literal).unwrap().into_bytes();
            let mut whole = Vec::new();
            unescape_into(literal.as_bytes(), &mut whole).unwrap();
            assert_eq!(whole, expected, "{literal}");
            let inner = &literal.as_bytes()[1..];
            for cut in 0..inner.len().min(200) {
                let (mut decoder, mut out) = (StringDecoder::default(), Vec::new());
                assert_eq!(decoder.feed(&inner[..cut], &mut out), Ok(None), "{literal} cut at {cut}");
                let end = decoder.feed(&inner[cut..], &mut out).unwrap();
                assert_eq!(end.map(|end| cut + end), Some(inner.len() - 1), "{literal} cut at {cut}");
                assert_eq!(out, expected, "{literal} cut at {cut}");
            }
        }
        // One byte at a time.
        let literal = r#""a\ud83d\ude00\n\u0001b""#.as_bytes();
        let (mut decoder, mut out) = (StringDecoder::default(), Vec::new());
        let ends: Vec<_> = literal[1..].iter().map(|byte| decoder.feed(&[*byte], &mut out).unwrap()).collect();
        assert_eq!(ends.last(), Some(&Some(0)));
        assert_eq!(out, "a😀\n\u{1}b".as_bytes());
    }

    #[test]
    fn bad_strings_are_refused() {
        for bad in [
            r#""\x""#,
            r#""\u12""#,
            r#""\u+123""#,
            r#""\ud83d""#,
            r#""\ud83dx\u0041""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            "unquoted",
            r#""\"#,
            r#""a"b""#,
        ] {
            assert_eq!(unescape_into(bad.as_bytes(), &mut Vec::new()), Err(InvalidString), "{bad}");
        }
    }

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
