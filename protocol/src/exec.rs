//! The bodies of `/exec`, `/health`, `/info` and of every error reply.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// `POST /exec` and `POST /exec/stream` body. Unknown fields are ignored, as the contract requires.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecRequest {
    /// The argv, run without a shell. Must hold at least the program.
    pub cmd: Vec<String>,
    /// Working directory; relative paths resolve against the server's workspace root. Absent: the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Seconds; absent or ≤ 0 means the default (600), larger than the server's cap means the cap. A whole number
    /// written with a fraction (`600.0`) counts: see `whole_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_seconds")]
    pub timeout: Option<i64>,
    /// Variables laid over the server's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Extension: text fed to the command's stdin (otherwise stdin is `/dev/null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Extension: exact bytes for stdin, base64 (wins over `stdin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_b64: Option<String>,
    /// Extension (named runs: docs/exec-server.md, "Runs"): names the run, which then survives a dropped connection for
    /// the server's reattach window, can be reattached to and is never started twice. Absent: the run ends with its
    /// connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<crate::RunId>,
    /// Extension: seconds without a byte of output (stdout or stderr) after which the command is stopped as timed
    /// out (exit 124). Absent or ≤ 0: none. Parsed like `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole_seconds")]
    pub idle_timeout: Option<i64>,
    /// Extension: the client reads `b64` (stream frames) and `output_b64`/`stderr_b64` (the reply), so output that
    /// is not valid UTF-8 travels as base64 only, with an empty `data`/`output`/`stderr` instead of its lossy text
    /// twin. The twin is what made binary output slow (U+FFFD and `\u00XX` escapes, up to 6 bytes a byte, on top
    /// of the base64) and no client that reads the base64 needs it. The contract's clients never send it and get
    /// today's frames and replies byte for byte. Never sent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub b64_only: bool,
    /// Extension (docs/exec-server.md, "Streamed stdin"): the command's stdin is a pipe the client feeds while it runs,
    /// through `POST /runs/{id}/stdin` (so it needs a `run_id`); `stdin` and `stdin_b64` are then ignored. A server
    /// that took it says so with [`STDIN_STREAM_HEADER`]. Never sent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdin_stream: bool,
    /// Extension (docs/exec-server.md, "TTY runs"): run the command on a pseudo-terminal of this size (needs a
    /// `run_id`; its input then comes through `POST /runs/{id}/stdin` as for [`ExecRequest::stdin_stream`]). A server
    /// that took it says so with [`crate::TTY_HEADER`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<crate::TtyRequest>,
    /// Extension: what becomes of the daemons the command leaves behind. It can only narrow the server's own
    /// policy: `"end"` ends them even on a server that keeps daemons; there is no value that keeps them on a server
    /// that ends them. Absent: the server's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemons: Option<DaemonsRequest>,
}

/// The one value of [`ExecRequest::daemons`]: end this command's daemons, whatever the server's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonsRequest {
    End,
}

/// The `Accept` of a client that takes a stream when the server can give one (docs/exec-server.md, "Content
/// negotiation"): an exec-server that knows the preference answers `POST /exec` as `POST /exec/stream` does; one that
/// does not (the contract's, an older exec-server) answers its JSON reply, and the client tells them apart by the
/// reply's `content-type`.
pub const STREAM_ACCEPT: &str = "text/event-stream, application/json;q=0.5";

/// The reply header of a stream whose request asked for [`ExecRequest::stdin_stream`] (or `tty`) and got it (value
/// `1`): the command's stdin is open for `POST /runs/{id}/stdin`. Without it, the server did not open stdin (it
/// does not know the field), and a client forwards nothing.
pub const STDIN_STREAM_HEADER: &str = "x-stdin-stream";

/// The `/exec` reply header that says the server honoured [`ExecRequest::b64_only`]: `output` and `stderr` are never
/// lossy text then, so a client may write stdout's text while the reply still arrives instead of holding it until it
/// knows no `output_b64` follows. (Without it, from an older server, the client holds the text.)
pub const B64_ONLY_HEADER: &str = "x-b64-only";

/// The `/exec` reply header that says the request's `run_id` named a run the server keeps (value `1`): a client that
/// has written the whole reply may `DELETE /runs/{id}` to have it forgotten. A server that ignores `run_id` (one
/// from before runs) does not send it, and is sent no DELETE.
pub const RUN_KEPT_HEADER: &str = "x-run-kept";

/// The `/exec` reply header that says where a cut stdout's head ends, sent with [`B64_ONLY_HEADER`] when the reply
/// cut stdout (head, marker, tail): its value N says the reply's first N bytes of stdout are the command's first N,
/// and the marker follows them. A client that writes stdout as it arrives stops there and holds the rest until the
/// reply is complete, so what it has written is always a prefix of the command's stdout: after a lost reply, a
/// named run's stream resumes exactly from there (docs/client.md, "Resume"), with nothing doubled.
pub const OUTPUT_HEAD_HEADER: &str = "x-output-head";

/// The header of every exec-server reply to a caller with the token (not `/health`'s) that names this start of the
/// server: a random id made when it starts (32 hex digits), the same in [`Info::boot_id`]. A client that saw one id
/// when its run was acknowledged and another when the run is no longer known knows the server restarted under it
/// (its runs died with the previous start), not that a reattach window passed.
pub const BOOT_ID_HEADER: &str = "x-boot-id";

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_false(value: &bool) -> bool {
    !*value
}

/// A timeout as JSON has it: JSON has one number type, and JSON Schema's `integer` (the OpenAPI document's) counts
/// `600.0` as the integer 600, as does a client whose encoder writes every float with a fraction (Python's
/// `json.dumps(600.0)`). So a number with no fractional part is taken; a fraction, or a number beyond i64, is still
/// an error.
fn whole_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    /// 2^63, beyond i64. Both ends are left out: an integer literal beyond i64 (`-9223372036854775809`) arrives
    /// here rounded to ±2^63, and must stay an error.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else { return Ok(None) };
    use serde::de::{Error, Unexpected};
    const EXPECTED: &str = "a whole number of seconds within i64";
    if let Some(seconds) = number.as_i64() {
        return Ok(Some(seconds));
    }
    if let Some(seconds) = number.as_u64() {
        return Err(D::Error::invalid_value(Unexpected::Unsigned(seconds), &EXPECTED));
    }
    match number.as_f64() {
        #[allow(clippy::cast_possible_truncation)] // whole and within i64: exact
        Some(seconds) if seconds.fract() == 0.0 && seconds > -LIMIT && seconds < LIMIT => Ok(Some(seconds as i64)),
        Some(seconds) => Err(D::Error::invalid_type(Unexpected::Float(seconds), &EXPECTED)),
        None => Err(D::Error::invalid_type(Unexpected::Other("a number"), &EXPECTED)),
    }
}

/// `POST /exec` reply: the contract's four fields plus our extensions. The field list is written once, here; `Text`
/// is the type of the four output fields (`output`, `stderr` and their base64 twins): `String` for every user but
/// one, the client's reply reader (sidecar-exec's `sidecar::reply_reader`), which reads them as
/// `Option<&RawValue>` borrowed from the body and decodes them itself (a reply can carry megabytes; see its
/// module doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExecReply<Text = String> {
    /// The command's exit code; 128+N when killed by signal N; 124 on timeout; -1 when it never started.
    pub exit_code: i32,
    /// stdout as text (lossy when it is not valid UTF-8; then `output_b64` holds the exact bytes).
    #[serde(default)]
    pub output: Text,
    /// stderr as text (lossy when it is not valid UTF-8; then `stderr_b64` holds the exact bytes).
    #[serde(default)]
    pub stderr: Text,
    /// Set when the command could not start or timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub timed_out: bool,
    /// The signal that ended the command, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub output_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_b64: Option<Text>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_b64: Option<Text>,
    /// Extension (docs/exec-server.md, "Which commands exist"): why a command that never started did not (with exit
    /// code -1), for a client to answer as a shell does (127 for `not_found`, 126 for `permission_denied`) without
    /// reading `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_error: Option<crate::StartErrorKind>,
}

/// A piece of an `/exec` reply's JSON, in order: literal JSON, or the place of one of the four output fields'
/// contents (inside its quotes). A server streams large output into those places; [`ExecReply::to_json`] fills them
/// from the reply itself. One layout for both, so the streamed reply is the same JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyPart {
    Json(Vec<u8>),
    Output,
    Stderr,
    OutputB64,
    StderrB64,
}

impl ExecReply {
    /// The same JSON as `serde_json::to_vec`, faster for large output (serde_json is 60% slower on text,
    /// `bench/ab-json.sh`): the reply of a blocking call can carry megabytes, and escaping them dominated its cost.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.output.len() + self.stderr.len() + 256);
        for part in self.parts() {
            match part {
                ReplyPart::Json(json) => out.extend_from_slice(&json),
                ReplyPart::Output => crate::json::write_escaped(&mut out, &self.output),
                ReplyPart::Stderr => crate::json::write_escaped(&mut out, &self.stderr),
                ReplyPart::OutputB64 => out.extend_from_slice(self.output_b64.as_deref().unwrap_or("").as_bytes()),
                ReplyPart::StderrB64 => out.extend_from_slice(self.stderr_b64.as_deref().unwrap_or("").as_bytes()),
            }
        }
        out
    }

    /// The reply's JSON as parts: every field but the four output ones written out, those four as places (a base64
    /// one only when it is `Some`, whatever it holds).
    pub fn parts(&self) -> Vec<ReplyPart> {
        use std::io::Write as _;
        let mut parts = vec![
            ReplyPart::Json(format!("{{\"exit_code\":{},\"output\":\"", self.exit_code).into_bytes()),
            ReplyPart::Output,
            ReplyPart::Json(b"\",\"stderr\":\"".to_vec()),
            ReplyPart::Stderr,
        ];
        let mut out = b"\"".to_vec();
        if let Some(error) = &self.error {
            out.extend_from_slice(b",\"error\":");
            crate::json::write_str(&mut out, error);
        }
        let _ = write!(out, ",\"timed_out\":{}", self.timed_out);
        if let Some(signal) = self.signal {
            let _ = write!(out, ",\"signal\":{signal}");
        }
        let _ = write!(
            out,
            ",\"duration_ms\":{},\"output_truncated\":{},\"stderr_truncated\":{}",
            self.duration_ms, self.output_truncated, self.stderr_truncated
        );
        for (name, value, place) in [
            ("output_b64", &self.output_b64, ReplyPart::OutputB64),
            ("stderr_b64", &self.stderr_b64, ReplyPart::StderrB64),
        ] {
            if value.is_some() {
                let _ = write!(out, ",\"{name}\":\"");
                parts.push(ReplyPart::Json(std::mem::take(&mut out)));
                parts.push(place);
                out.push(b'"');
            }
        }
        if let Some(kind) = self.start_error {
            let _ = write!(out, ",\"start_error\":\"{}\"", kind.as_str());
        }
        out.push(b'}');
        parts.push(ReplyPart::Json(out));
        parts
    }

    /// The exact stdout bytes.
    pub fn stdout_bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>, base64::DecodeError> {
        crate::text::decode(&self.output, self.output_b64.as_deref())
    }

    /// The exact stderr bytes.
    pub fn stderr_bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>, base64::DecodeError> {
        crate::text::decode(&self.stderr, self.stderr_b64.as_deref())
    }
}

/// `GET /health` reply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Health {
    pub status: String,
}

/// `GET /info` reply. Never carries any environment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Info {
    pub cwd: String,
    pub runtime: String,
    pub version: String,
    /// Extension: the largest timeout the server grants, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_timeout: Option<u64>,
    /// Extension: how many commands may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<usize>,
    /// Extension: how many commands run right now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<usize>,
    /// Extension (docs/exec-server.md, "Which commands exist"): which of its runtime's commands
    /// ([`crate::commands_for`]) are on the server's PATH, in the table's order. Absent from a server that does not say
    /// (then assume all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Extension: how many daemons (sessions left behind by commands that ended by themselves) the server keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemons_kept: Option<usize>,
    /// Extension: this start of the server ([`BOOT_ID_HEADER`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// Body of every 4xx/5xx reply: one message that names the problem and what to do, and for the refusals a client
/// acts on, a `code` it matches instead of the message (absent otherwise, so the contract's body is unchanged).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<crate::ErrorCode>,
    /// With [`crate::ErrorCode::StdinGap`]: the bytes of stdin the server has taken, where the client resends from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
}

impl ErrorBody {
    /// A body with a message and no code.
    pub fn message(error: impl Into<String>) -> Self {
        ErrorBody { error: error.into(), code: None, received: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_request_parses_and_ignores_unknown_fields() {
        let req: ExecRequest =
            serde_json::from_str(r#"{"cmd":["ls","-l"],"cwd":"sub","timeout":5,"env":{"A":"1"},"x":true}"#).unwrap();
        assert_eq!(req.cmd, ["ls", "-l"]);
        assert_eq!(req.timeout, Some(5));
        assert_eq!(req.env.unwrap()["A"], "1");
    }

    #[test]
    fn whole_timeouts_parse_whatever_their_notation() {
        let timeout = |json: &str| {
            serde_json::from_str::<ExecRequest>(&format!(r#"{{"cmd":["x"],"timeout":{json}}}"#)).map(|r| r.timeout)
        };
        assert_eq!(timeout("981.0").unwrap(), Some(981));
        assert_eq!(timeout("-5.0").unwrap(), Some(-5));
        assert_eq!(timeout("1e3").unwrap(), Some(1000));
        assert_eq!(timeout("null").unwrap(), None);
        assert_eq!(timeout("9223372036854775807").unwrap(), Some(i64::MAX));
        assert_eq!(timeout("-9223372036854775808").unwrap(), Some(i64::MIN));
        for bad in
            ["1.5", "9223372036854775808", "-9223372036854775809", "-9223372036854776000", "9.3e18", "\"5\"", "true"]
        {
            assert!(timeout(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::from_str::<ExecRequest>(r#"{"cmd":["x"]}"#).unwrap().timeout, None);
    }

    #[test]
    fn run_id_and_idle_timeout_are_optional_and_validated() {
        let req: ExecRequest = serde_json::from_str(r#"{"cmd":["x"],"run_id":"r-1","idle_timeout":30.0}"#).unwrap();
        assert_eq!(req.run_id.as_ref().map(crate::RunId::as_str), Some("r-1"));
        assert_eq!(req.idle_timeout, Some(30));
        let err = serde_json::from_str::<ExecRequest>(r#"{"cmd":["x"],"run_id":"../x"}"#).unwrap_err().to_string();
        assert!(err.contains("run_id") && err.contains("UUID"), "{err}");
        assert!(serde_json::from_str::<ExecRequest>(r#"{"cmd":["x"],"run_id":""}"#).is_err());
        assert!(serde_json::from_str::<ExecRequest>(r#"{"cmd":["x"],"idle_timeout":1.5}"#).is_err());
        // Absent fields stay absent on the way out: a request without them is the contract's body.
        let plain = ExecRequest { cmd: vec!["x".into()], ..Default::default() };
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"cmd":["x"]}"#);
    }

    #[test]
    fn reply_from_an_old_server_parses() {
        let reply: ExecReply =
            serde_json::from_str(r#"{"exit_code":-1,"output":"","stderr":"","error":"command timed out after 1s"}"#)
                .unwrap();
        assert_eq!(reply.exit_code, -1);
        assert!(!reply.timed_out);
    }

    #[test]
    fn hand_written_json_matches_serde() {
        let full = ExecReply {
            exit_code: 137,
            output: "a\"b\n\u{1}".into(),
            stderr: "e".into(),
            error: Some("command timed out after 1s".into()),
            timed_out: true,
            signal: Some(9),
            duration_ms: 12,
            output_truncated: true,
            stderr_truncated: false,
            output_b64: Some("/w==".into()),
            stderr_b64: Some("AA==".into()),
            start_error: None,
        };
        let not_started = ExecReply {
            exit_code: -1,
            error: Some("failed to start command: npx: not found".into()),
            start_error: Some(crate::StartErrorKind::NotFound),
            ..Default::default()
        };
        for reply in [full, not_started, ExecReply::default()] {
            assert_eq!(String::from_utf8(reply.to_json()).unwrap(), serde_json::to_string(&reply).unwrap());
        }
    }

    #[test]
    fn reply_leaves_out_empty_extensions() {
        let json = serde_json::to_string(&ExecReply::<String> { exit_code: 0, ..Default::default() }).unwrap();
        assert!(!json.contains("error") && !json.contains("signal") && !json.contains("b64"), "{json}");
        assert_eq!(
            String::from_utf8(ExecReply { exit_code: -1, error: Some("x".into()), ..Default::default() }.to_json())
                .unwrap(),
            r#"{"exit_code":-1,"output":"","stderr":"","error":"x","timed_out":false,"duration_ms":0,"output_truncated":false,"stderr_truncated":false}"#,
            "a reply without start_error is the contract's bytes"
        );
        let with = ExecReply {
            exit_code: -1,
            start_error: Some(crate::StartErrorKind::PermissionDenied),
            ..Default::default()
        };
        let json = String::from_utf8(with.to_json()).unwrap();
        assert!(json.ends_with(r#","stderr_truncated":false,"start_error":"permission_denied"}"#), "{json}");
        assert_eq!(serde_json::from_str::<ExecReply>(&json).unwrap(), with);
    }

    /// The parity and TTY fields are all optional: absent, a request and an info body are the bytes they were.
    #[test]
    fn absent_parity_fields_leave_the_contracts_bytes() {
        let request =
            ExecRequest { cmd: vec!["x".into()], run_id: Some(crate::RunId::new("r").unwrap()), ..Default::default() };
        assert_eq!(serde_json::to_string(&request).unwrap(), r#"{"cmd":["x"],"run_id":"r"}"#);
        let parsed: ExecRequest = serde_json::from_str(r#"{"cmd":["x"]}"#).unwrap();
        assert!(!parsed.stdin_stream && parsed.tty.is_none() && parsed.daemons.is_none());
        let full: ExecRequest = serde_json::from_str(
            r#"{"cmd":["x"],"run_id":"r","stdin_stream":true,"tty":{"rows":30,"cols":100,"term":"xterm"},"daemons":"end"}"#,
        )
        .unwrap();
        assert!(full.stdin_stream);
        assert_eq!(full.tty, Some(crate::TtyRequest { rows: 30, cols: 100, term: Some("xterm".into()), modes: None }));
        assert_eq!(full.daemons, Some(DaemonsRequest::End));
        assert_eq!(
            serde_json::to_string(&full).unwrap(),
            r#"{"cmd":["x"],"run_id":"r","stdin_stream":true,"tty":{"rows":30,"cols":100,"term":"xterm"},"daemons":"end"}"#
        );
        let keep = serde_json::from_str::<ExecRequest>(r#"{"cmd":["x"],"daemons":"keep"}"#).unwrap_err().to_string();
        assert!(keep.contains("`end`"), "a request can only narrow the policy: {keep}");
        let info = Info {
            cwd: "/w".into(),
            runtime: "node".into(),
            version: "1".into(),
            max_timeout: None,
            max_concurrent: None,
            running: None,
            commands: None,
            daemons_kept: None,
            boot_id: None,
        };
        assert_eq!(serde_json::to_string(&info).unwrap(), r#"{"cwd":"/w","runtime":"node","version":"1"}"#);
        let listed = Info { commands: Some(vec!["node".into(), "npm".into()]), daemons_kept: Some(1), ..info };
        let json = serde_json::to_string(&listed).unwrap();
        assert!(json.ends_with(r#""commands":["node","npm"],"daemons_kept":1}"#), "{json}");
        assert_eq!(serde_json::from_str::<Info>(&json).unwrap(), listed);
    }
}
