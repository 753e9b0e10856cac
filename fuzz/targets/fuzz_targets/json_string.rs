//! Fuzz target: the client's JSON string decoder (sidecar-exec's sidecar::wire::json_string), against the properties in decoder_properties::json_string.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::json_string::check(input));
