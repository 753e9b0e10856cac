//! The terminal of a TTY run (docs/exec-server.md, "TTY runs"): the request's `tty`, the body of `POST
//! /runs/{id}/resize`, and the reply header that says a server gave the command a terminal.

use serde::{Deserialize, Serialize};

/// `ExecRequest.tty`: run the command on a pseudo-terminal of `rows` × `cols` as its controlling terminal, with
/// `TERM` set to `term`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtyRequest {
    pub rows: u16,
    pub cols: u16,
    /// The command's `TERM`. Absent: the `TERM` of the command's environment (the request's `env` over the
    /// server's), or `xterm-256color` when that has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<String>,
    /// The client's terminal modes ([`crate::TerminalModes`]), laid over the pty's before the command starts, as
    /// ssh's `pty-req` does. Absent (a client before it): the pty's own modes and `iutf8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<crate::TerminalModes>,
}

/// `POST /runs/{id}/resize` body: the terminal's new size. The command gets SIGWINCH from the kernel (none when the
/// size did not change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeRequest {
    pub rows: u16,
    pub cols: u16,
}

/// The reply header of a stream whose request asked for `tty` and got it (value `1`): the command runs on a
/// terminal, its output is one stream (`stdout` frames), and its input goes through `POST /runs/{id}/stdin`. A
/// server without it ran the command without a terminal (it does not know the field).
pub const TTY_HEADER: &str = "x-tty";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tty_request_without_term_leaves_it_out() {
        let tty: TtyRequest = serde_json::from_str(r#"{"rows":30,"cols":100}"#).unwrap();
        assert_eq!(tty, TtyRequest { rows: 30, cols: 100, term: None, modes: None });
        assert_eq!(serde_json::to_string(&tty).unwrap(), r#"{"rows":30,"cols":100}"#);
        let with: TtyRequest = serde_json::from_str(r#"{"rows":1,"cols":2,"term":"xterm-256color"}"#).unwrap();
        assert_eq!(with.term.as_deref(), Some("xterm-256color"));
        assert!(serde_json::from_str::<TtyRequest>(r#"{"rows":70000,"cols":2}"#).is_err(), "rows are 16 bits");
        assert!(serde_json::from_str::<TtyRequest>(r#"{"rows":-1,"cols":2}"#).is_err());
        let modes: TtyRequest =
            serde_json::from_str(r#"{"rows":1,"cols":2,"modes":{"chars":{"erase":8},"flags":{"echo":false}}}"#)
                .unwrap();
        let named = modes.modes.unwrap();
        assert_eq!((named.chars["erase"], named.flags["echo"], named.ispeed), (Some(8), false, None));
        let err = serde_json::from_str::<TtyRequest>(r#"{"rows":1,"cols":2,"modes":{"chars":{"erase":300}}}"#);
        assert!(err.unwrap_err().to_string().starts_with("tty.modes.chars.erase must be"));
        let resize: ResizeRequest = serde_json::from_str(r#"{"rows":40,"cols":120}"#).unwrap();
        assert_eq!(serde_json::to_string(&resize).unwrap(), r#"{"rows":40,"cols":120}"#);
    }
}
