//! Fuzz target: exec-server's checks of a `POST /exec` body (env, tty, terminal modes), against the properties in decoder_properties::request.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: &[u8]| decoder_properties::request::check(input));
