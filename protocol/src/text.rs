//! Bytes that travel in JSON: valid UTF-8 as text, anything else as lossy text plus an exact base64 twin.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Splits bytes into what a JSON text field can hold and, when the bytes are not valid UTF-8, their exact base64.
pub fn encode(bytes: &[u8]) -> (String, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), None),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), Some(to_base64(bytes))),
    }
}

/// Rebuilds the exact bytes from a text field and its optional base64 twin (the twin wins when present). Text is
/// borrowed, not copied: a blocking reply can hold hundreds of MiB.
pub fn decode<'a>(text: &'a str, b64: Option<&str>) -> Result<std::borrow::Cow<'a, [u8]>, base64::DecodeError> {
    match b64 {
        Some(b64) => STANDARD.decode(b64).map(std::borrow::Cow::Owned),
        None => Ok(std::borrow::Cow::Borrowed(text.as_bytes())),
    }
}

/// Encodes bytes as standard base64 (used for stdin and for exact output), with base64-simd (see [`append_base64`]).
pub fn to_base64(bytes: &[u8]) -> String {
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// Decodes standard base64, strictly (the base64 crate: it refuses non-canonical padding bits, and its errors name
/// the offending byte, which a 400 for a bad `stdin_b64` quotes).
pub fn from_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    STANDARD.decode(text)
}

/// Appends the standard base64 of `bytes` to `out`, encoded in place: no intermediate String for bulk output.
/// base64-simd, not the base64 crate: its engine ran at a tenth of memory speed here, and was the
/// largest cost of binary output on both ends (bench/ab-json.sh prints both).
pub fn append_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    base64_simd::STANDARD.encode_append(bytes, out);
}

/// Base64 that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidBase64;

/// Decodes standard base64 and appends the bytes to `out` (no intermediate Vec); SIMD, like [`append_base64`].
pub fn append_from_base64(out: &mut Vec<u8>, text: &[u8]) -> Result<(), InvalidBase64> {
    base64_simd::STANDARD.decode_append(text, out).map_err(|_| InvalidBase64)
}

/// One piece of [`utf8_chunks`]: valid text, then the invalid sequence after it (empty at the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utf8Chunk<'a> {
    valid: &'a str,
    invalid: &'a [u8],
}

impl<'a> Utf8Chunk<'a> {
    pub fn valid(&self) -> &'a str {
        self.valid
    }

    pub fn invalid(&self) -> &'a [u8] {
        self.invalid
    }
}

/// The same pieces as the standard library's `<[u8]>::utf8_chunks`, found with `str::from_utf8`: the standard
/// iterator looks at one byte at a time, `from_utf8` skips ASCII a word at a time, which made the iterator the
/// largest cost of a large `/exec` reply of text.
pub fn utf8_chunks(bytes: &[u8]) -> impl Iterator<Item = Utf8Chunk<'_>> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (valid_len, invalid_len) = match std::str::from_utf8(rest) {
            Ok(_) => (rest.len(), 0),
            Err(err) => (err.valid_up_to(), err.error_len().unwrap_or(rest.len() - err.valid_up_to())),
        };
        let (valid, tail) = rest.split_at(valid_len);
        let (invalid, tail) = tail.split_at(invalid_len);
        rest = tail;
        // `from_utf8` vouched for `valid`; the fallback is never taken.
        Some(Utf8Chunk { valid: std::str::from_utf8(valid).unwrap_or_default(), invalid })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_travels_as_text_only() {
        assert_eq!(encode("héllo\r\n".as_bytes()), ("héllo\r\n".to_owned(), None));
    }

    #[test]
    fn utf8_chunks_are_the_standard_ones() {
        let mut samples: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"plain".to_vec(),
            "ünï ✓ 😀".as_bytes().to_vec(),
            b"\xe2\x82\x41\xe2\x28\xf0\x9f\x98".to_vec(),
            b"ok \xc3".to_vec(),
            vec![0xff; 9],
            b"\xed\xa0\x80x\xf4\x90\x80\x80y\xc0\xaf".to_vec(),
        ];
        samples.push((0..=255u8).cycle().take(3000).collect());
        for bytes in samples {
            let ours: Vec<_> = utf8_chunks(&bytes).map(|c| (c.valid(), c.invalid())).collect();
            let std: Vec<_> = bytes.utf8_chunks().map(|c| (c.valid(), c.invalid())).collect();
            assert_eq!(ours, std, "{bytes:?}");
        }
    }

    #[test]
    fn base64_appends_in_place() {
        for len in 0..10 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37) as u8).collect();
            let mut out = b"x".to_vec();
            append_base64(&mut out, &bytes);
            assert_eq!(out, [b"x".as_slice(), to_base64(&bytes).as_bytes()].concat());
            let mut back = b"y".to_vec();
            append_from_base64(&mut back, to_base64(&bytes).as_bytes()).unwrap();
            assert_eq!(back, [b"y".as_slice(), &bytes].concat());
        }
    }

    #[test]
    fn invalid_utf8_round_trips_through_base64() {
        let bytes = [0xff, b'a', 0xc3, b'\n', 0];
        let (text, b64) = encode(&bytes);
        assert_eq!(text, "\u{fffd}a\u{fffd}\n\0");
        assert_eq!(*decode(&text, b64.as_deref()).unwrap(), bytes);
    }
}
