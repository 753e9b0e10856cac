//! Reading the JSON strings of a blocking reply as they arrive: the one large string a reply holds is decoded in
//! pieces instead of built as a String (see [`crate::sidecar::wire::reply_reader`]); protocol's `json` writes them.

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
}
