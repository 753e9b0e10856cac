//! Fuzz target: the client's event-stream reader (sidecar-exec's sidecar::wire::sse), against the properties in decoder_properties::sse.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::sse::check(input));
