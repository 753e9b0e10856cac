//! `GET /metrics`: known traffic gives exact counter values; the token guards it unless `--metrics-open`.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn known_traffic_gives_exact_counts() {
    let server = server().token("metrics-token").start().await;
    // Refused: no token (twice), and a body over the cap.
    assert_eq!(scrape(&server, None).await.0, 401);
    let response = server.client().post(format!("{}/exec", server.url)).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 401);
    let big = format!("{{\"cmd\":[\"true\"],\"stdin\":\"{}\"}}", "x".repeat(protocol::MAX_BODY_BYTES));
    assert_eq!(server.post("/exec", big).send().await.unwrap().status(), 413);

    for cmd in [json!(["true"]), json!(["printf", "12345"]), json!(["sh", "-c", "echo oops >&2; exit 3"])] {
        server.exec(json!({ "cmd": cmd })).await;
    }
    let killed = server.exec(json!({"cmd": ["sh", "-c", "kill -9 $$"]})).await;
    assert_eq!(killed.signal, Some(9));
    let sleeping = marker();
    let timed_out = server.exec(json!({"cmd": ["sh", "-c", sleeper(&sleeping)], "timeout": 1})).await;
    assert_eq!(timed_out.exit_code, 124);
    let missing = server.exec(json!({"cmd": ["no-such-program-for-metrics"]})).await;
    assert_eq!(missing.exit_code, -1);
    let frames = server.stream(json!({"cmd": ["printf", "abc"]})).await;
    assert_eq!(exit_frame(&frames).0, 0);
    // One descendant that leaves its group and outlives its command.
    let daemon = marker();
    // The command waits until the daemon is in its own session, so that the group's own ending cannot catch it.
    let script = format!(
        "setsid sh -c 'touch escaped; exec {}' > /dev/null 2>&1 & until [ -e escaped ]; do sleep 0.01; done",
        sleeper(&daemon)
    );
    server.exec(json!({"cmd": ["sh", "-c", script]})).await;
    assert_no_survivors(&daemon, Duration::from_secs(10));

    let token = Some("metrics-token");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        // The sweep is counted when it starts, after its batch: wait for it rather than for a time.
        let (status, metrics) = scrape(&server, token).await;
        assert_eq!(status, 200);
        if metrics.get("exec_server_escaped_processes_ended_total") == Some(&1.0) {
            break metrics;
        }
        assert!(std::time::Instant::now() < deadline, "the escaped process was not counted: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let commands = |outcome: &str| value(&metrics, &format!("exec_server_commands_total{{outcome=\"{outcome}\"}}"));
    assert_eq!(commands("exit_zero"), 4.0, "true, printf, the stream, the setsid script");
    assert_eq!(commands("exit_nonzero"), 1.0);
    assert_eq!(commands("signal"), 1.0);
    assert_eq!(commands("timed_out"), 1.0);
    assert_eq!(commands("cancelled"), 0.0);
    assert_eq!(commands("not_started"), 1.0);
    assert_eq!(value(&metrics, "exec_server_command_duration_seconds_count"), 7.0, "the 7 that started");
    assert_eq!(value(&metrics, "exec_server_commands_running"), 0.0);
    assert_eq!(value(&metrics, "exec_server_output_bytes_total{stream=\"stdout\"}"), 5.0 + 3.0);
    assert_eq!(value(&metrics, "exec_server_output_bytes_total{stream=\"stderr\"}"), 5.0);
    let requests = |endpoint: &str, status: u16| {
        metrics
            .get(&format!("exec_server_http_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}}"))
            .copied()
            .unwrap_or(0.0)
    };
    assert_eq!(requests("/metrics", 401), 1.0);
    assert_eq!(requests("/exec", 401), 1.0);
    assert_eq!(requests("/exec", 413), 1.0);
    assert_eq!(requests("/exec", 200), 7.0);
    assert_eq!(requests("/exec/stream", 200), 1.0);
    assert_eq!(value(&metrics, &format!("exec_server_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"))), 1.0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_open_drops_the_token_for_metrics_only() {
    let server = server().token("metrics-token").flag("--metrics-open").start().await;
    assert_eq!(scrape(&server, None).await.0, 200);
    let info = server.client().get(format!("{}/info", server.url)).send().await.unwrap();
    assert_eq!(info.status(), 401, "every other endpoint keeps the token");
    // What the open endpoint gives is all a caller without the token learns: not this start's boot id.
    for method in [reqwest::Method::GET, reqwest::Method::POST] {
        let open = server.client().request(method.clone(), format!("{}/metrics", server.url)).send().await.unwrap();
        assert!(open.headers().get(protocol::BOOT_ID_HEADER).is_none(), "{method}: {:?}", open.headers());
    }
    let with_token = server.client().get(format!("{}/info", server.url)).bearer_auth("metrics-token").send().await;
    assert!(with_token.unwrap().headers().get(protocol::BOOT_ID_HEADER).is_some(), "a caller with the token gets it");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_protocol_requests_are_counted_by_outcome() {
    let ipc = tempfile::tempdir().unwrap();
    let server = server().arg("--ipc-dir", ipc.path().to_str().unwrap()).start().await;
    let write = |id: &str, body: serde_json::Value| {
        std::fs::write(ipc.path().join(format!("exec-request-{id}.json")), body.to_string()).unwrap()
    };
    write("ran", json!({"command": "true"}));
    write("missing", json!({"argv": ["no-such-program-for-metrics"]}));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let (_, metrics) = scrape(&server, None).await;
        let count = |outcome: &str| metrics.get(&format!("exec_server_ipc_requests_total{{outcome=\"{outcome}\"}}"));
        if count("ran").is_some() && count("not_started").is_some() {
            break metrics;
        }
        assert!(std::time::Instant::now() < deadline, "file requests not counted: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(value(&metrics, "exec_server_ipc_requests_total{outcome=\"ran\"}"), 1.0);
    assert_eq!(value(&metrics, "exec_server_ipc_requests_total{outcome=\"not_started\"}"), 1.0);
    server.stop().await;
}
