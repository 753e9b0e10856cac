//! Request ids and trace context: echoed, validated, and given to the command.

use serde_json::json;

use crate::support::*;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn request_id(response: &reqwest::Response) -> String {
    response.headers()["x-request-id"].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn request_ids_are_echoed_or_made() {
    let server = server().token("trace-token").start().await;
    let exec = || server.post("/exec", json!({"cmd": ["true"]}).to_string());
    let response = exec().header("x-request-id", "build-42.step:7").send().await.unwrap();
    assert_eq!(request_id(&response), "build-42.step:7");

    let made = request_id(&exec().send().await.unwrap());
    let other = request_id(&exec().send().await.unwrap());
    assert!(!made.is_empty() && made != other, "each request gets its own id: {made} {other}");

    for invalid in ["has space", "quote\"d", &"x".repeat(129)] {
        let response = exec().header("x-request-id", invalid).send().await.unwrap();
        let replaced = request_id(&response);
        assert!(replaced != invalid && !replaced.is_empty(), "{invalid} replaced by {replaced}");
    }
    // Refused requests carry their id too.
    let refused = server.client().get(format!("{}/info", server.url)).header("x-request-id", "no-token-1");
    let response = refused.send().await.unwrap();
    assert_eq!((response.status().as_u16(), request_id(&response).as_str()), (401, "no-token-1"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_valid_traceparent_reaches_the_command_and_an_invalid_one_does_not() {
    let server = server().start().await;
    let print = json!({"cmd": ["sh", "-c", "printf %s \"${TRACEPARENT-unset}\""]}).to_string();
    for path in ["/exec", "/exec/stream"] {
        let response = server.post(path, print.clone()).header("traceparent", TRACEPARENT).send().await.unwrap();
        let body = response.text().await.unwrap();
        assert!(body.contains(TRACEPARENT), "{path}: {body}");
    }
    // The header wins over a TRACEPARENT in the request's env.
    let with_env = json!({"cmd": ["sh", "-c", "printf %s \"$TRACEPARENT\""], "env": {"TRACEPARENT": "stale"}});
    let response = server.post("/exec", with_env.to_string()).header("traceparent", TRACEPARENT).send().await.unwrap();
    assert!(response.text().await.unwrap().contains(TRACEPARENT));

    let invalid = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
    let response = server.post("/exec", print).header("traceparent", invalid).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let reply: protocol::ExecReply = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(reply.output, "unset", "an invalid traceparent is ignored");
    server.stop().await;
}

/// A later version's traceparent reaches the command as version 00 with the fields version 00 has, never with what it
/// appends (before, `TRACEPARENT` and every log line of the request carried the header as sent, suffix and all).
#[tokio::test(flavor = "multi_thread")]
async fn a_later_traceparent_version_is_passed_on_as_version_00_without_its_suffix() {
    let server = server().start().await;
    let print = json!({"cmd": ["sh", "-c", "printf %s \"${TRACEPARENT-unset}\""]}).to_string();
    let fields = &TRACEPARENT[3..];
    for suffix in ["-later", "- request_id=forged", &format!("-{}", "x".repeat(20_000))] {
        let given = format!("01-{fields}{suffix}");
        let response = server.post("/exec", print.clone()).header("traceparent", &given).send().await.unwrap();
        let reply: protocol::ExecReply = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(reply.output, TRACEPARENT, "given {given:.80}");
    }
    server.stop().await;
}
