//! Fuzz target: sidecar-exec's reading of a reply's head (status line and headers: stream or not, a terminal run, stdin open, boot id, Retry-After, Location), against the properties in decoder_properties::reply_head.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::reply_head::check(input));
