//! The differential suite: every command line of the corpus run natively and through the generated
//! wrappers in the same test, comparing stdout, stderr, their interleaving, exit codes and whether the command
//! stopped when it should; one column forwards to an exec-server, one to a real sshd, and one forwards to an
//! exec-server on a terminal. See docs/testing.md, "The differential suite".

mod columns;
mod corpus;
mod harness;
mod known;
mod report;
mod terminal;

use harness::At;
use known::Column;
use protocol::vars::BUILD_SIDECARS;

use crate::sshd::Sshd;
use crate::support::{server_with, TestServer};

/// An exec-server for the python runtime, and both sides forwarding to it through the wrappers, in the default
/// configuration. A client that vanishes (a hung case killed at its bound) leaves its run for the reattach window:
/// 1 s, so that its command is gone before the harness counts what a case left behind.
async fn exec_server_sides(scratch: &std::path::Path) -> (TestServer, columns::Sides) {
    let server = server_with(&["--runtime", "python", "--reattach-window", "1"], None).await;
    let sidecars = format!(r#"{{"python":{{"internal_url":"{}"}}}}"#, server.url);
    let sides = columns::sides(
        server.workspace.path(),
        scratch,
        server.client().args(["python"]),
        vec![(BUILD_SIDECARS.into(), sidecars.clone().into())],
        |install| install.env(BUILD_SIDECARS, &sidecars),
        |_| false,
    )
    .await;
    (server, sides)
}

/// Native against the wrappers forwarding to an exec-server for the python runtime, in the default configuration.
#[tokio::test(flavor = "multi_thread")]
async fn differential_wrappers() {
    let scratch = tempfile::tempdir().unwrap();
    let (server, sides) = exec_server_sides(scratch.path()).await;
    let outcomes = tokio::task::spawn_blocking(move || columns::run_all(&sides, corpus::CASES, At::Pipes)).await;
    report::judge(Column::Wrappers, &outcomes.unwrap());
    server.stop().await;
}

/// The same on a terminal: each case natively on a pty of the harness's, and through the wrappers on a
/// pty of the same size and `TERM`, where sidecar-exec takes its TTY mode; the screens compared byte for byte. The
/// corpus's cases whose stdin and stdout are the terminal ([`harness::Case::at_a_terminal`]), and the terminal's own.
#[tokio::test(flavor = "multi_thread")]
async fn differential_terminal() {
    let scratch = tempfile::tempdir().unwrap();
    let (server, sides) = exec_server_sides(scratch.path()).await;
    let runtime = tokio::runtime::Handle::current();
    let outcomes =
        tokio::task::spawn_blocking(move || columns::run_all(&sides, &corpus::at_a_terminal(), At::Terminal(&runtime)))
            .await;
    report::judge(Column::Terminal, &outcomes.unwrap());
    server.stop().await;
}

/// Native against the wrappers forwarding over OpenSSH to a real sshd on 127.0.0.1 (this machine is the host, and
/// the host's folder is the workspace itself), in the default configuration.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server, which .ci/run installs); CI runs it"]
async fn differential_ssh() {
    let sshd = Sshd::start().unwrap_or_else(|reason| panic!("the ssh column needs a working sshd: {reason}"));
    let workspace = sshd.workspace.path().to_owned();
    let client = || sshd.client().env("SSH_HOST_CWD", &workspace);
    let sides = columns::sides(
        &workspace,
        sshd.dir.path(),
        client(),
        columns::env_of(client()),
        // The installer asks the host which commands it has (one `ssh-exec --probe`): it needs the server's
        // settings and ssh on its PATH, and still no python there.
        |install| sshd.configure(install).env("PATH", sshd.ssh_client_only()),
        is_shared_connection,
    )
    .await;
    let outcomes = tokio::task::spawn_blocking(move || columns::run_all(&sides, corpus::CASES, At::Pipes)).await;
    report::judge(Column::Ssh, &outcomes.unwrap());
}

/// ssh-exec's shared connection (`ssh … ControlMaster=yes`), which outlives every case by design.
fn is_shared_connection(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|byte| *byte == 0).any(|arg| arg == b"ControlMaster=yes"))
}

/// docs/testing.md names every case of the corpus (its table) and every difference that stays (stated there).
#[test]
fn the_docs_name_every_case_and_every_stated_difference() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/testing.md")).unwrap();
    let section = docs.split("## The differential suite").nth(1).expect("docs/testing.md has no differential section");
    let section = section.split("\n## ").next().unwrap();
    for case in corpus::CASES.iter().chain(corpus::TERMINAL_CASES) {
        assert!(section.contains(&format!("`{}`", case.name)), "docs/testing.md does not list the case {}", case.name);
    }
    for known in known::KNOWN_DIFFERENCES.iter().filter(|known| known.reason.starts_with("stated")) {
        assert!(
            section.contains(&format!("`{}` ({})", known.case, known.column.name())),
            "docs/testing.md does not state why {} differs in the {} column",
            known.case,
            known.column.name()
        );
    }
}
