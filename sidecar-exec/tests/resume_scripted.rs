//! The client's resume against a scripted server: replays that overlap what the client has, dropped
//! middles, exit totals that do not add up, a run the server no longer knows, and a blocking reply cut short. Each
//! case is what exec-server may legitimately send, or what a broken one could, written out byte by byte.

use crate::raw_server::{raw_server, RawServer, Reply};
use crate::support::go_client as client;
use crate::support::*;

const SSE: &str = "text/event-stream";

fn events(frames: &[&str]) -> Vec<u8> {
    frames.iter().map(|frame| format!("data: {frame}\n\n")).collect::<String>().into_bytes()
}

/// The first stream of every case: 8 bytes of stdout, then the connection ends without an exit frame.
fn first_stream() -> Reply {
    Reply::full("200 OK", &[("content-type", SSE)], events(&[r#"{"type":"stdout","data":"one\ntwo","offset":0}"#]))
}

/// A server whose `POST /exec/stream` gives [`first_stream`] and whose reattach gives `resumed`.
async fn scripted(resumed: impl Fn(&str) -> Reply + Send + Sync + 'static) -> RawServer {
    raw_server(move |request| {
        if request.starts_with("POST /exec/stream") {
            first_stream()
        } else if request.starts_with("GET /runs/") {
            resumed(request)
        } else {
            Reply::full("404 Not Found", &[], "")
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overlapping_replay_is_trimmed_and_a_dropped_middle_is_marked() {
    let server = scripted(|request| {
        // The client asks for exactly what it has; the server may start a frame earlier.
        assert!(request.contains("?stdout=8&stderr=0&b64_only=true "), "{request}");
        Reply::full(
            "200 OK",
            &[("content-type", SSE)],
            events(&[
                r#"{"type":"stdout","data":"two\nthree","offset":4}"#,
                r#"{"type":"dropped","stream":"stdout","offset":14,"bytes":100}"#,
                r#"{"type":"stdout","data":"tail","offset":114}"#,
                r#"{"type":"stderr","data":"warn","offset":0}"#,
                r#"{"type":"exit","data":2,"stdout_bytes":119,"stderr_bytes":5}"#,
            ]),
        )
    })
    .await;
    let output = client(&server.url).stream(true).env("SIDECAR_VERBOSE", "1").args(["go", "build"]).run().await;
    assert_eq!(stdout(&output), "one\ntwo\nthree\n[… 100 bytes dropped …]\ntail\n");
    assert_eq!(
        without_explain(&stderr(&output)),
        "sidecar-exec: connection lost, resumed at stdout 8, stderr 0\nwarn\n"
    );
    assert_eq!(output.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn totals_that_do_not_add_up_and_holes_are_errors_not_silence() {
    let short = scripted(|_| {
        Reply::full("200 OK", &[("content-type", SSE)], events(&[r#"{"type":"exit","data":0,"stdout_bytes":20}"#]))
    })
    .await;
    let output = client(&short.url).stream(true).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(1), "one\ntwo\n".to_owned()));
    assert!(stderr(&output).contains("reported 20 bytes of stdout") && stderr(&output).contains("incomplete"));

    let hole = scripted(|_| {
        Reply::full("200 OK", &[("content-type", SSE)], events(&[r#"{"type":"stdout","data":"x","offset":50}"#]))
    })
    .await;
    let output = client(&hole.url).stream(true).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(1), "one\ntwo\n".to_owned()));
    assert!(stderr(&output).contains("from byte 50 on, but only 8"), "{}", stderr(&output));
}

/// The replay of a run the server stopped because no client reattached: its message, then its exit frame with
/// `cause` added (the `stopped_by` field, or nothing as from a server that does not send it).
fn window_passed_stream(cause: &str) -> Reply {
    let exit = format!(r#"{{"type":"exit","data":143,"signal":15,"stdout_bytes":8,"stderr_bytes":0{cause}}}"#);
    Reply::full(
        "200 OK",
        &[("content-type", SSE)],
        events(&[r#"{"type":"error","data":"no client reattached within 30 s; the command was stopped"}"#, &exit]),
    )
}

/// A run the server acknowledged and no longer knows (the same server: the window passed, or the run ended and was
/// forgotten, past `--retain` or past the bound on tombstones, 8 × `--max-runs`): exit 1 saying both and how much
/// output arrived, never "run it again" (the command did start, and may have ended with 0). A replay that says the
/// window stopped it: the window's line, with no rerun advised either.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_the_server_no_longer_knows_is_never_advised_as_a_rerun() {
    let gone = scripted(|_| {
        Reply::full(
            "404 Not Found",
            &[("content-type", "application/json")],
            r#"{"error":"run x is not known: it never existed or ended more than --retain ago","code":"run_not_known"}"#,
        )
    })
    .await;
    let output = client(&gone.url).stream(true).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(1), "one\ntwo\n".to_owned()));
    let line = stderr(&output);
    assert!(line.contains(&format!("the sidecar at {} no longer knows run ", gone.url)), "{line}");
    assert!(line.contains("or the command ended and the sidecar no longer keeps its result"), "{line}");
    assert!(line.contains("up to stdout byte 8 and stderr byte 0 arrived"), "{line}");
    assert!(!line.contains("run it again"), "{line}");

    let stopped = scripted(|_| window_passed_stream(r#","stopped_by":"reattach_window""#)).await;
    let output = client(&stopped.url).stream(true).args(["go", "build"]).run().await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("lost for longer than its reattach window"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("run it again"), "{}", stderr(&output));
    // Attaching to a run its own client left too long: the same ending.
    let output = client(&stopped.url).args(["--attach", "go", "r1"]).run().await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("lost for longer than its reattach window"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("run it again"), "{}", stderr(&output));
}

/// Only the code says a run is not kept: a 404 without it, whatever its text, is a server (or a proxy) without the
/// runs endpoint. The client then neither re-POSTs nor blames the window: it fails with the loss, as without resume.
/// Likewise an end without `stopped_by` is the command's own, whatever its error says.
#[tokio::test(flavor = "multi_thread")]
async fn a_404_without_the_code_means_no_runs_endpoint() {
    let posts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = posts.clone();
    let proxy = raw_server(move |request| {
        if request.starts_with("POST /exec/stream") {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            first_stream()
        } else {
            Reply::full(
                "404 Not Found",
                &[("content-type", "application/json")],
                r#"{"error":"run x is not known: it never existed or ended more than --retain ago"}"#,
            )
        }
    })
    .await;
    let output = client(&proxy.url).stream(true).args(["go", "build"]).run().await;
    assert_eq!((output.status.code(), stdout(&output)), (Some(1), "one\ntwo\n".to_owned()));
    assert!(stderr(&output).contains("without an exit frame"), "{}", stderr(&output));
    assert!(!stderr(&output).contains("reattach window"), "{}", stderr(&output));
    assert_eq!(posts.load(std::sync::atomic::Ordering::SeqCst), 1, "no re-POST on a 404 without the code");

    let uncoded = scripted(|_| window_passed_stream("")).await;
    let output = client(&uncoded.url).stream(true).args(["go", "build"]).run().await;
    // The command died of SIGTERM (its exit frame's `signal`), and so does the client (signal_death).
    let signal = std::os::unix::process::ExitStatusExt::signal(&output.status);
    assert_eq!(signal, Some(15), "{}", stderr(&output));
    assert!(!stderr(&output).contains("lost for longer"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blocking_reply_cut_short_is_replaced_by_the_runs_stream() {
    let server = raw_server(|request| {
        if request.starts_with("POST /exec ") {
            Reply::cut("application/json", 1000, r#"{"exit_code":4,"output":"par"#)
        } else if request.starts_with("GET /runs/") {
            assert!(request.contains("?stdout=0&stderr=0&b64_only=true "), "{request}");
            Reply::full(
                "200 OK",
                &[("content-type", SSE)],
                events(&[
                    r#"{"type":"stdout","data":"partial output","offset":0}"#,
                    r#"{"type":"stderr","data":"e","nl":false,"offset":0}"#,
                    r#"{"type":"error","data":"something to say"}"#,
                    r#"{"type":"exit","data":4,"stdout_bytes":15,"stderr_bytes":1}"#,
                ]),
            )
        } else {
            Reply::full("404 Not Found", &[], "")
        }
    })
    .await;
    let output = client(&server.url).args(["go", "build"]).run().await;
    assert_eq!(stdout(&output), "partial output\n");
    assert_eq!(stderr(&output), "esidecar-exec: something to say\n");
    assert_eq!(output.status.code(), Some(4));
}

/// A blocking reply from a server that sends `x-b64-only` is written as it arrives; cut short, the
/// resume asks the run's stream from what was written (never from 0, which would double it), and stops writing at
/// `x-output-head` (past it the reply holds the cut's marker, which is no part of the run's stream).
#[tokio::test(flavor = "multi_thread")]
async fn a_blocking_reply_written_as_it_arrived_resumes_after_what_was_written() {
    for (head, written) in [(None, 11), (Some("4"), 4)] {
        let server = raw_server(move |request| {
            if request.starts_with("POST /exec ") {
                let reply = Reply::cut("application/json", 1000, r#"{"exit_code":4,"output":"partial out"#)
                    .with_header("x-b64-only", "1");
                match head {
                    Some(head) => reply.with_header("x-output-head", head),
                    None => reply,
                }
            } else if request.starts_with("GET /runs/") {
                assert!(request.contains(&format!("?stdout={written}&stderr=0&b64_only=true ")), "{request}");
                Reply::full(
                    "200 OK",
                    &[("content-type", SSE)],
                    events(&[
                        // A replay from an earlier offset than asked: trimmed, not doubled.
                        r#"{"type":"stdout","data":"partial output","offset":0}"#,
                        r#"{"type":"exit","data":4,"stdout_bytes":15,"stderr_bytes":0}"#,
                    ]),
                )
            } else {
                Reply::full("404 Not Found", &[], "")
            }
        })
        .await;
        let output = client(&server.url).stream(false).env("SIDECAR_VERBOSE", "1").args(["go", "build"]).run().await;
        assert_eq!(stdout(&output), "partial output\n", "head {head:?}");
        assert_eq!(
            without_explain(&stderr(&output)),
            format!("sidecar-exec: connection lost, resumed at stdout {written}, stderr 0\n"),
            "head {head:?}"
        );
        assert_eq!(output.status.code(), Some(4));
    }
}
