//! The terminal of a TTY run (docs/exec-server.md, "TTY runs"): the request's `tty`, the body of `POST
//! /runs/{id}/resize`, and the reply header that says a server gave the command a terminal.

use serde::de::Unexpected;
use serde::{Deserialize, Deserializer, Serialize};

/// `ExecRequest.tty`: run the command on a pseudo-terminal of `rows` × `cols` as its controlling terminal, with
/// `TERM` set to `term`. Read from a JSON object only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct TtyRequest {
    #[serde(deserialize_with = "whole_u16")]
    pub rows: u16,
    #[serde(deserialize_with = "whole_u16")]
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
/// size did not change). Read from a JSON object only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct ResizeRequest {
    #[serde(deserialize_with = "whole_u16")]
    pub rows: u16,
    #[serde(deserialize_with = "whole_u16")]
    pub cols: u16,
}

crate::objects::object_only!(TtyRequest, "a JSON object like {\"rows\": 30, \"cols\": 100}");
crate::objects::object_only!(ResizeRequest, "a JSON object like {\"rows\": 30, \"cols\": 100}");

/// A row or column count as JSON has it: JSON Schema's `integer` (the OpenAPI document's) counts `30.0` as 30, so a
/// number with no fractional part within 0..=65535 is taken (as the request's `timeout` is).
fn whole_u16<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u16, D::Error> {
    use serde::de::Error;
    const EXPECTED: &str = "a whole number from 0 to 65535";
    let number = serde_json::Number::deserialize(deserializer)?;
    match crate::objects::whole(&number).map(u16::try_from) {
        Some(Ok(whole)) => Ok(whole),
        _ => Err(D::Error::invalid_value(Unexpected::Other(&number.to_string()), &EXPECTED)),
    }
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

    #[test]
    fn sizes_are_objects_of_whole_numbers_as_json_schema_counts_them() {
        let resize: ResizeRequest = serde_json::from_str(r#"{"rows":1020.0,"cols":80}"#).unwrap();
        assert_eq!(resize, ResizeRequest { rows: 1020, cols: 80 });
        let tty: TtyRequest = serde_json::from_str(r#"{"rows":24.0,"cols":8e1}"#).unwrap();
        assert_eq!((tty.rows, tty.cols), (24, 80));
        for bad in [r#"{"rows":1.5,"cols":2}"#, r#"{"rows":65536.0,"cols":2}"#, r#"{"rows":-0.5,"cols":2}"#] {
            assert!(serde_json::from_str::<ResizeRequest>(bad).is_err(), "{bad}");
        }
        let err = serde_json::from_str::<ResizeRequest>("[30, 100]").unwrap_err().to_string();
        assert!(err.starts_with("invalid type: sequence, expected a JSON object like"), "{err}");
        assert!(serde_json::from_str::<TtyRequest>("[30, 100]").is_err());
        let nested = serde_json::from_str::<crate::ExecRequest>(r#"{"cmd":["sh"],"tty":[30,100]}"#);
        assert!(nested.unwrap_err().to_string().contains("expected a JSON object"));
        let modes = r#"{"rows":1,"cols":2,"modes":[null,null]}"#;
        assert!(serde_json::from_str::<TtyRequest>(modes).unwrap_err().to_string().contains("expected a JSON object"));
        let whole = r#"{"rows":1,"cols":2,"modes":{"chars":{"erase":8.0},"ispeed":38400.0}}"#;
        let modes = serde_json::from_str::<TtyRequest>(whole).unwrap().modes.unwrap();
        assert_eq!((modes.chars["erase"], modes.ispeed), (Some(8), Some(38400)));
    }
}
