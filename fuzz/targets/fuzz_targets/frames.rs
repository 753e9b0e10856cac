//! Fuzz target: protocol's stream frames: the client's reader of one frame and the server's encoder, against the properties in decoder_properties::frames.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::frames::check(input));
