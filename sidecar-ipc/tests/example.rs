//! The worked example (`examples/orchestrator/run.sh`) runs end to end, on the binary under test.

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_photo_tagger_example_runs_end_to_end() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/orchestrator/run.sh");
    let output = tokio::process::Command::new("sh")
        .arg(script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SIDECAR_IPC", BIN)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(HANG, output).await.expect("the example hung").unwrap();
    let printed = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}\n{}", stderr(&output));
    let result: serde_json::Value = serde_json::from_str(printed.lines().last().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"processed": 3, "failed": 1}));
    assert!(
        printed.contains("beach: {\"confidence\":0.92,\"tags\":[\"beach\",\"sunset\",\"sea\",\"people\"]}"),
        "{printed}"
    );
    assert!(printed.contains("4 prompts, 4 clears"), "{printed}");
    assert!(stderr(&output).contains("no usable decision for blurry"), "{}", stderr(&output));
}
