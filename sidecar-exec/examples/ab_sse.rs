//! A/B: the client's hand-written SSE reader ([`sidecar_exec::sidecar::wire::sse::SseParser`]) against `eventsource-stream`, the crate
//! the design card names for the job, on the same byte streams. Run by `bench/ab-sse.sh`:
//!
//! ```text
//! cargo run --release -p sidecar-exec --example ab_sse [-- --runs N]     # the markdown table
//! ```
//!
//! Each stream is 64 MiB of exec-server-like events (`data: {"type":"stdout",…}` and a blank line), handed over in
//! 16 KiB pieces (a size hyper's reads give on loopback) through a `futures` stream, as reqwest's `bytes_stream`
//! hands them to the client. Workloads: many small frames (~90 B, one line of build output each), big frames
//! (128 KiB of data, the most an exec-server event holds: two 64 KiB pipe reads) and few huge frames (4 MiB, 16 in
//! all: the contract's server sends a long line of output as one event). Both readers only hand each event's data
//! on; the consumer counts events and bytes, and the table refuses figures where the two disagree.
//!
//! Every measurement runs in a fresh process (this program, started again with `ours|crate|none WORKLOAD`) so that
//! its peak RSS (`VmHWM`) is its own. `none` reads the stream without parsing: its time and memory are the harness's
//! own share of both arms.

use std::convert::Infallible;
use std::process::Command;
use std::time::Instant;

use eventsource_stream::Eventsource;
use futures_util::{FutureExt, StreamExt};

const TOTAL: usize = 64 * 1024 * 1024;
const PIECE: usize = 16 * 1024;
const WORKLOADS: [&str; 3] = ["small", "big", "huge"];
const ARMS: [&str; 3] = ["ours", "crate", "none"];

/// Whole events, repeated until the stream holds at least [`TOTAL`] bytes.
fn period(workload: &str) -> Vec<u8> {
    let mut out = Vec::new();
    match workload {
        "small" => {
            for n in 0..12_000 {
                out.extend_from_slice(
                    format!(
                        "data: {{\"type\":\"stdout\",\"data\":\"   Compiling module-{n:06} v0.1.{n} (build)\"}}\n\n"
                    )
                    .as_bytes(),
                );
            }
        }
        "big" | "huge" => {
            // Written in place: a temporary copy of the payload would raise every arm's peak alike and hide the
            // readers' own memory.
            let (size, count) = if workload == "big" { (128 * 1024, 8) } else { (4 * 1024 * 1024, 1) };
            for _ in 0..count {
                out.extend_from_slice(b"data: {\"type\":\"stdout\",\"data\":\"");
                out.extend((0..size).map(|i| b'A' + (i % 26) as u8));
                out.extend_from_slice(b"\"}\n\n");
            }
        }
        other => panic!("unknown workload {other}"),
    }
    out
}

/// The stream's pieces, made as they are read (the whole stream is never held).
fn pieces(period: Vec<u8>) -> impl Iterator<Item = Result<Vec<u8>, Infallible>> {
    let total = TOTAL.div_ceil(period.len()) * period.len();
    (0..total.div_ceil(PIECE)).map(move |i| {
        let (start, end) = (i * PIECE, ((i + 1) * PIECE).min(total));
        let mut piece = Vec::with_capacity(end - start);
        let mut at = start;
        while at < end {
            let offset = at % period.len();
            let take = (end - at).min(period.len() - offset);
            piece.extend_from_slice(&period[offset..offset + take]);
            at += take;
        }
        Ok(piece)
    })
}

/// Events and data bytes read, as the client reads them.
fn measure(arm: &str, workload: &str) -> (usize, usize) {
    let mut stream = futures_util::stream::iter(pieces(period(workload)));
    let (mut events, mut bytes) = (0, 0);
    let run = async {
        match arm {
            "ours" => {
                let mut parser = sidecar_exec::sidecar::wire::sse::SseParser::new();
                let mut out = Vec::new();
                while let Some(Ok(piece)) = stream.next().await {
                    parser.feed(&piece, &mut out).expect("a valid stream");
                    for data in out.drain(..) {
                        events += 1;
                        bytes += data.len();
                    }
                }
            }
            "crate" => {
                let mut parsed = stream.eventsource();
                while let Some(event) = parsed.next().await {
                    events += 1;
                    bytes += event.expect("a valid stream").data.len();
                }
            }
            _ => {
                while let Some(Ok(piece)) = stream.next().await {
                    bytes += piece.len();
                }
            }
        }
    };
    // The stream is in memory: it never waits, so one poll runs it to the end.
    run.now_or_never().expect("an in-memory stream never waits");
    (events, bytes)
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One measurement in a fresh process: `events bytes seconds peak_kib`.
fn child(arm: &str, workload: &str) {
    let start = Instant::now();
    let (events, bytes) = measure(arm, workload);
    let took = start.elapsed().as_secs_f64();
    println!("{events} {bytes} {took} {}", peak_rss_kib());
}

struct Cell {
    events: usize,
    bytes: usize,
    seconds: Vec<f64>,
    peak_kib: u64,
}

fn run_cell(arm: &str, workload: &str, runs: usize) -> Cell {
    let exe = std::env::current_exe().expect("own path");
    let mut cell = Cell { events: 0, bytes: 0, seconds: Vec::new(), peak_kib: 0 };
    for _ in 0..runs {
        let output = Command::new(&exe).args([arm, workload]).output().expect("start a measurement");
        assert!(output.status.success(), "{arm} {workload}: {}", String::from_utf8_lossy(&output.stderr));
        let line = String::from_utf8(output.stdout).expect("ASCII");
        let fields: Vec<&str> = line.split_whitespace().collect();
        cell.events = fields[0].parse().expect("events");
        cell.bytes = fields[1].parse().expect("bytes");
        cell.seconds.push(fields[2].parse().expect("seconds"));
        cell.peak_kib = cell.peak_kib.max(fields[3].parse().expect("peak"));
    }
    cell.seconds.sort_by(f64::total_cmp);
    cell
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [arm, workload] = args.as_slice() {
        if ARMS.contains(&arm.as_str()) {
            return child(arm, workload);
        }
    }
    let runs = match args.as_slice() {
        [flag, n] if flag == "--runs" => n.parse().expect("--runs N"),
        [] => 5,
        _ => panic!("usage: ab_sse [--runs N] | ab_sse ours|crate|none small|big|huge"),
    };
    let stream_mib =
        |workload: &str| (TOTAL.div_ceil(period(workload).len()) * period(workload).len()) as f64 / 1048576.0;
    println!("| workload | reader | events | throughput (median of {runs}) | peak RSS (above the harness) | crate against ours |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for workload in WORKLOADS {
        let cells: Vec<(&str, Cell)> = ARMS.iter().map(|arm| (*arm, run_cell(arm, workload, runs))).collect();
        let (ours, krate, harness) = (&cells[0].1, &cells[1].1, &cells[2].1);
        assert_eq!((ours.events, ours.bytes), (krate.events, krate.bytes), "{workload}: the readers disagree");
        let throughput = |cell: &Cell| stream_mib(workload) / cell.seconds[cell.seconds.len() / 2];
        let label = match workload {
            "small" => "many small frames (~90 B)",
            "big" => "big frames (128 KiB)",
            _ => "few huge frames (4 MiB, 16)",
        };
        for (arm, cell) in &cells {
            let name = match *arm {
                "ours" => "sidecar::wire::sse (hand-written)",
                "crate" => "eventsource-stream 0.2",
                _ => "no parsing (harness only)",
            };
            let against = match *arm {
                "crate" => {
                    let gap = throughput(cell) / throughput(ours) - 1.0;
                    if gap < -0.5 {
                        format!("{:.0}× slower", throughput(ours) / throughput(cell))
                    } else {
                        format!("{:+.1}% throughput", gap * 100.0)
                    }
                }
                _ => String::new(),
            };
            let (events, peak) = if *arm == "none" {
                ("—".to_owned(), format!("{:.1} MiB", cell.peak_kib as f64 / 1024.0))
            } else {
                let above = cell.peak_kib.saturating_sub(harness.peak_kib) as f64 / 1024.0;
                (cell.events.to_string(), format!("{:.1} MiB (+{above:.1})", cell.peak_kib as f64 / 1024.0))
            };
            println!("| {label} | {name} | {events} | {:.0} MiB/s | {peak} | {against} |", throughput(cell));
        }
    }
}
