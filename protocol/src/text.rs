//! Bytes that travel in JSON: valid UTF-8 as text, anything else as lossy text plus an exact base64 twin.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Splits bytes into what a JSON text field can hold and, when the bytes are not valid UTF-8, their exact base64.
pub fn encode(bytes: &[u8]) -> (String, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), None),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), Some(STANDARD.encode(bytes))),
    }
}

/// Rebuilds the exact bytes from a text field and its optional base64 twin (the twin wins when present).
pub fn decode(text: &str, b64: Option<&str>) -> Result<Vec<u8>, base64::DecodeError> {
    match b64 {
        Some(b64) => STANDARD.decode(b64),
        None => Ok(text.as_bytes().to_vec()),
    }
}

/// Encodes bytes as standard base64 (used for stdin and for exact output).
pub fn to_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard base64.
pub fn from_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    STANDARD.decode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_travels_as_text_only() {
        assert_eq!(encode("héllo\r\n".as_bytes()), ("héllo\r\n".to_owned(), None));
    }

    #[test]
    fn invalid_utf8_round_trips_through_base64() {
        let bytes = [0xff, b'a', 0xc3, b'\n', 0];
        let (text, b64) = encode(&bytes);
        assert_eq!(text, "\u{fffd}a\u{fffd}\n\0");
        assert_eq!(decode(&text, b64.as_deref()).unwrap(), bytes);
    }
}
