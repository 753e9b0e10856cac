//! Fuzz target: the client's blocking-reply reader (sidecar-exec's sidecar::wire::reply_reader), against the properties in decoder_properties::reply_reader.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::reply_reader::check(input));
