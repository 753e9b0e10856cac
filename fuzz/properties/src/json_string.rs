//! `sidecar::wire::json_string`, the client's decoder of a reply's JSON strings as they arrive: the same text and the
//! same end however the string is cut, what serde_json reads (it is only more lenient about raw control bytes),
//! never longer than its escaped form, and the text protocol's writer escaped given back.

use sidecar_exec::sidecar::wire::json_string::{unescape_into, InvalidString, StringDecoder};

use crate::pieces::Cut;

/// The body is the inside of a string literal, continuing (its closing quote, if any, ends it). No options.
pub fn check(input: &[u8]) {
    let cut = Cut::of(input);
    let (whole_text, whole_end) = decode(&[cut.body]);
    let (text, end) = decode(&cut.pieces());
    assert_eq!((&text, end), (&whole_text, whole_end), "cut into pieces, the string reads otherwise");
    let (bytes_text, bytes_end) = decode(&cut.bytes());
    assert_eq!((&bytes_text, bytes_end), (&whole_text, whole_end), "a byte at a time, the string reads otherwise");
    match end {
        Ok(Some(quote)) => {
            let inside = &cut.body[..quote];
            assert!(text.len() <= inside.len(), "decoded text longer than its escaped form");
            // serde_json refuses raw control bytes and invalid UTF-8, which this decoder keeps as they are.
            if std::str::from_utf8(inside).is_ok() && !inside.iter().any(|&byte| byte < 0x20) {
                let literal = [b"\"", &cut.body[..=quote]].concat();
                let read: String = serde_json::from_slice(&literal).expect("serde_json refuses what was decoded");
                assert_eq!(read.as_bytes(), text.as_slice(), "not the text serde_json reads");
            }
        }
        Ok(None) => assert!(text.len() <= cut.body.len(), "decoded text longer than its escaped form"),
        Err(InvalidString) => {
            // An escape JSON does not have: serde_json refuses the string too, whatever follows it.
            let literal = [b"\"", cut.body, b"\""].concat();
            let first = serde_json::Deserializer::from_slice(&literal).into_iter::<String>().next();
            assert!(!matches!(first, Some(Ok(_))), "refused a string serde_json reads: {first:?}");
        }
    }
    round_trip(&cut);
}

/// The text of the pieces until the string ends, and where it ends in the whole (or the error).
fn decode(pieces: &[&[u8]]) -> (Vec<u8>, Result<Option<usize>, InvalidString>) {
    let (mut decoder, mut text, mut before) = (StringDecoder::default(), Vec::new(), 0);
    for piece in pieces {
        match decoder.feed(piece, &mut text) {
            Ok(None) => before += piece.len(),
            Ok(Some(quote)) => return (text, Ok(Some(before + quote))),
            Err(error) => return (text, Err(error)),
        }
    }
    (text, Ok(None))
}

/// protocol's writer, then this decoder, in pieces and whole, give back the text (the body read as UTF-8, lossy).
fn round_trip(cut: &Cut<'_>) {
    let text = String::from_utf8_lossy(cut.body);
    let mut literal = Vec::new();
    protocol::json::write_str(&mut literal, &text);
    let mut whole = Vec::new();
    unescape_into(&literal, &mut whole).expect("a string protocol wrote is refused");
    assert_eq!(whole, text.as_bytes(), "protocol's string read back otherwise");
    let (read, end) = decode(&cut.split(&literal[1..]));
    assert_eq!((read.as_slice(), end), (text.as_bytes(), Ok(Some(literal.len() - 2))), "read back otherwise in pieces");
}
