//! The name sidecar-exec gives each run it starts.

use protocol::RunId;

/// A fresh run id: 32 hex digits (128 bits) from /dev/urandom.
///
/// *Decision:* random, not derived from the command: two agents running the same `cargo build` are two runs, and a
/// retry of the *same* call is recognised because this process re-sends the very same id, not because the command
/// looks alike. 128 bits make a collision with any other run the server keeps as unlikely as a UUID's.
pub fn new_run_id() -> std::io::Result<RunId> {
    Ok(RunId::new(protocol::random_hex(16)?).expect("32 hex digits are a valid run id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let (a, b) = (new_run_id().unwrap(), new_run_id().unwrap());
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
