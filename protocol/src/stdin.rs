//! Streamed stdin (docs/exec-server.md, "Streamed stdin"): the reply of `POST /runs/{id}/stdin?offset=N[&eof=true]`,
//! whose body is the raw bytes of the command's stdin from offset N.

use serde::{Deserialize, Serialize};

/// `POST /runs/{id}/stdin` reply (200).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StdinReply {
    /// The bytes of stdin the server has taken so far: the next chunk starts here. Bytes below it that come again
    /// (a resent chunk after a lost reply) are ignored.
    pub received: u64,
    /// The server takes no more input: the EOF was given, the command closed its stdin, or the run ended. The
    /// client stops reading its own stdin; bytes sent now are discarded, as a write to a closed pipe is.
    pub closed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_two_fields() {
        let reply = StdinReply { received: 42, closed: false };
        assert_eq!(serde_json::to_string(&reply).unwrap(), r#"{"received":42,"closed":false}"#);
        assert_eq!(serde_json::from_str::<StdinReply>(r#"{"received":42,"closed":false}"#).unwrap(), reply);
    }
}
