//! The differential suite (issue 22): every command line of the corpus run natively and through the generated
//! wrappers in the same test, comparing stdout, stderr, their interleaving, exit codes and whether the command
//! stopped when it should. The column here forwards to an exec-server.

mod columns;
mod corpus;
mod harness;
mod known;
mod report;

use known::Column;
use protocol::vars::BUILD_SIDECARS;

use crate::support::server_with;

/// Native against the wrappers forwarding to an exec-server for the python runtime, in the default configuration.
#[tokio::test(flavor = "multi_thread")]
async fn differential_wrappers() {
    // A client that vanishes (a hung case killed at its bound) leaves its run for the reattach window: 1 s, so
    // that its command is gone before the harness counts what a case left behind.
    let server = server_with(&["--runtime", "python", "--reattach-window", "1"], None).await;
    let scratch = tempfile::tempdir().unwrap();
    let sidecars = format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url);
    let sides = columns::sides(
        server.workspace.path(),
        scratch.path(),
        server.client().args(["python"]),
        vec![(BUILD_SIDECARS.into(), sidecars.clone().into())],
        |install| install.env(BUILD_SIDECARS, &sidecars),
        |_| false,
    )
    .await;
    let outcomes = tokio::task::spawn_blocking(move || columns::run_all(&sides)).await.unwrap();
    report::judge(Column::Wrappers, &outcomes);
    server.stop().await;
}
