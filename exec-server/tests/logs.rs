//! `--log-format json`: one JSON object per event; request id and trace context on the lines of a request; a line
//! for commands that never started and for refused requests, with no token or env value in any.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{raw_exchange, Running};

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn post(port: u16, headers: &str, body: &str) -> String {
    raw_exchange(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap(), "POST", "/exec", headers, body)
}

#[test]
fn json_lines_carry_the_request_and_never_a_secret() {
    let workspace = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["--host", "127.0.0.1", "--port", "0", "--log-format", "json", "--grace", "0.5", "--cwd"])
        .arg(workspace.path())
        .env("EXEC_SERVER_TOKEN", "server-token-secret")
        .stdout(Stdio::null());
    let (mut server, first) = Running::start(command, |line| line.contains("exec-server listening"));
    let listening: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(listening["message"], "exec-server listening", "{first}");
    let port: u16 = listening["addr"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();

    let auth = "Authorization: Bearer server-token-secret\r\n";
    let traced = format!("{auth}X-Request-Id: log-test-1\r\ntraceparent: {TRACEPARENT}\r\n");
    let ran = json!({"cmd": ["printf", "ok"], "env": {"SOME_SECRET": "env-value-secret"}}).to_string();
    assert!(post(port, &traced, &ran).contains("\"exit_code\":0"));
    let missing = json!({"cmd": ["no-such-program-for-logs"]}).to_string();
    assert!(post(port, &format!("{auth}X-Request-Id: log-test-2\r\n"), &missing).contains("\"exit_code\":-1"));
    let later =
        format!("{auth}X-Request-Id: log-test-4\r\ntraceparent: 01-{}- request_id=forged\r\n", &TRACEPARENT[3..]);
    assert!(post(port, &later, &ran).contains("\"exit_code\":0"));
    let refused = post(port, "Authorization: Bearer wrong-token-secret\r\nX-Request-Id: log-test-3\r\n", &ran);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");

    let (status, _) = server.stop_with(nix::sys::signal::Signal::SIGTERM, Duration::from_secs(20));
    assert!(status.success());
    let rest = server.log().join("\n");
    let lines: Vec<Value> = server
        .log()
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}")))
        .collect();
    let find = |message: &str, id: &str| {
        lines
            .iter()
            .find(|line| line["message"] == message && line["span"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no {message:?} line for {id}: {rest}"))
    };
    let finished = find("command finished", "log-test-1");
    assert_eq!(finished["span"]["traceparent"], TRACEPARENT);
    assert_eq!((finished["program"].as_str(), finished["exit_code"].as_i64()), (Some("printf"), Some(0)));
    // A later version's trace context is logged as the version 00 it is passed on as: its suffix reaches no line.
    assert_eq!(find("command finished", "log-test-4")["span"]["traceparent"], TRACEPARENT);
    assert!(!rest.contains("forged"), "a traceparent's suffix reached the log: {rest}");
    let not_started = find("command not started", "log-test-2");
    assert!(not_started["error"].as_str().unwrap().contains("no-such-program-for-logs"));
    let refusal = find("request refused", "log-test-3");
    assert_eq!((refusal["status"].as_u64(), refusal["endpoint"].as_str()), (Some(401), Some("/exec")));
    for secret in ["server-token-secret", "wrong-token-secret", "env-value-secret"] {
        assert!(!rest.contains(secret), "{secret} in the log: {rest}");
    }
}
