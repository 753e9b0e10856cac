//! The properties the hand-written decoders of untrusted bytes (and exec-server's checks of a request) keep for any input, one module per decoder: each
//! `check(input)` panics when a property fails. The fuzz targets in `fuzz/` call them on what libFuzzer makes; the
//! regression test here replays every input saved in `fuzz/regressions/<target>/` (the minimised corpus and every
//! crash found), so `cargo test --workspace` keeps what fuzzing once found.
//!
//! The properties are stronger than "does not panic": each decoder is compared with a reference (a plain model, or
//! serde_json), must give the same result however its input is cut into pieces, must give back what the matching
//! encoder wrote, and must not hold more than the bytes it was fed.

pub mod frames;
pub mod json_string;
pub mod pieces;
pub mod reply_head;
pub mod reply_reader;
pub mod request;
pub mod sse;

/// A target's check: panics when the input breaks a property.
pub type Check = fn(&[u8]);

/// The fuzz targets, by the name of their folder under `fuzz/regressions/` and their `check`.
pub const TARGETS: [(&str, Check); 6] = [
    ("sse", sse::check),
    ("json_string", json_string::check),
    ("reply_reader", reply_reader::check),
    ("frames", frames::check),
    ("reply_head", reply_head::check),
    ("request", request::check),
];

#[cfg(test)]
mod regressions;
