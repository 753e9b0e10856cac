//! A/B of the hand-written JSON encoder (`protocol::json`, the stream frames' `chunk_event`, `ExecReply::to_json`)
//! against serde_json on the same workloads. Run by `bench/ab-json.sh`, which prints the markdown table it writes
//! here to stdout. Each row: the same output bytes encoded both ways (checked equal), median of several rounds.
//!
//! Frames: the serde_json side is what the server would do without `chunk_event`: build the `Frame` from the pipe
//! bytes (text, or lossy text and base64, as Strings: the derived type holds them) and `serde_json::to_vec` it.
//! Replies: one `ExecReply`, built once, encoded by `to_json` and by `serde_json::to_vec`; and read back to stdout's
//! bytes by `sidecar_exec::sidecar::wire::reply_reader::ReplyReader` (the client's reader) and by `serde_json::from_slice::<ExecReply>`.

use std::time::{Duration, Instant};

use protocol::frames::Chunk;
use protocol::{ExecReply, Frame, FrameEncoder, StreamKind};
use sidecar_exec::sidecar::wire::reply_reader::ReplyReader;

const MIB: usize = 1024 * 1024;
/// Bytes per frame: one pipe read, as the server frames them.
const FRAME: usize = 64 * 1024;

/// A reproducible stream of pseudo-random bytes (xorshift), so every run measures the same input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Lines of lowercase words: what build logs mostly are.
fn text(size: usize) -> Vec<u8> {
    let mut rng = Rng(1);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let words = 3 + rng.next() % 12;
        for word in 0..words {
            if word > 0 {
                out.push(b' ');
            }
            for _ in 0..2 + rng.next() % 9 {
                out.push(b'a' + (rng.next() % 26) as u8);
            }
        }
        out.push(b'\n');
    }
    out.truncate(size);
    out
}

/// Text with a control byte, a quote or a backslash every few bytes: ANSI colours, escaped paths, tabs.
fn control_heavy(size: usize) -> Vec<u8> {
    let mut rng = Rng(2);
    (0..size)
        .map(|_| match rng.next() % 8 {
            0 => [0x1b, b'\t', b'"', b'\\', 0x01][(rng.next() % 5) as usize],
            1 => b'\n',
            _ => b'a' + (rng.next() % 26) as u8,
        })
        .collect()
}

/// Random bytes: an archive or an image written to stdout.
fn binary(size: usize) -> Vec<u8> {
    let mut rng = Rng(3);
    (0..size).map(|_| rng.next() as u8).collect()
}

/// The payloads of the frames the server would send for `bytes`: pipe reads of [`FRAME`] bytes, each sent as one
/// frame (a trailing newline added and implied, so that both encoders see one whole frame per payload).
fn frame_payloads(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.chunks(FRAME).map(|chunk| chunk.iter().map(|&b| if b == b'\n' { b' ' } else { b }).collect()).collect()
}

fn ours_frames(payloads: &[Vec<u8>], b64_only: bool) -> Vec<Vec<u8>> {
    let mut events = Vec::with_capacity(payloads.len());
    for payload in payloads {
        let mut encoder = FrameEncoder::new(StreamKind::Stdout, usize::MAX).b64_only(b64_only);
        let mut line = Vec::with_capacity(payload.len() + 1);
        line.extend_from_slice(payload);
        line.push(b'\n');
        encoder.push(&line, &mut events);
    }
    events
}

fn serde_frames(payloads: &[Vec<u8>], b64_only: bool) -> Vec<Vec<u8>> {
    payloads
        .iter()
        .map(|payload| {
            // With b64_only the lossy text is never built, as the server would not build it.
            let (data, b64) = match std::str::from_utf8(payload) {
                Err(_) if b64_only => (String::new(), Some(protocol::text::to_base64(payload))),
                _ => protocol::text::encode(payload),
            };
            Frame::Stdout(Chunk { data, nl: true, b64, offset: None }).to_event()
        })
        .collect()
}

fn reply_of(bytes: &[u8], b64_only: bool) -> ExecReply {
    let (output, output_b64) = protocol::text::encode(bytes);
    let output = if output_b64.is_some() && b64_only { String::new() } else { output };
    ExecReply { exit_code: 0, output, duration_ms: 1, output_b64, ..Default::default() }
}

/// stdout's bytes from a reply body, read by sidecar::wire::reply_reader as the client reads it.
fn read_ours(body: &[u8]) -> Vec<u8> {
    let mut reader = ReplyReader::default();
    for piece in body.chunks(FRAME) {
        reader.feed(piece).unwrap();
    }
    let reply = reader.finish();
    let mut stdout = Vec::new();
    reply.view().unwrap().write_stdout(&mut stdout).unwrap();
    stdout
}

/// stdout's bytes from a reply body, read by serde_json into an `ExecReply` (the pieces gathered first).
fn read_serde(body: &[u8]) -> Vec<u8> {
    let mut whole = Vec::new();
    for piece in body.chunks(FRAME) {
        whole.extend_from_slice(piece);
    }
    let reply: ExecReply = serde_json::from_slice(&whole).unwrap();
    reply.stdout_bytes().unwrap().into_owned()
}

/// Median wall time of `rounds` runs of `work`.
fn median(rounds: usize, mut work: impl FnMut() -> usize) -> Duration {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(work());
            start.elapsed()
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

fn rate(size: usize, took: Duration) -> f64 {
    size as f64 / MIB as f64 / took.as_secs_f64()
}

fn main() {
    let size = std::env::var("AB_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64) * MIB;
    let rounds = std::env::var("AB_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    println!("| workload | what | hand-written | serde_json | serde_json slower by |");
    println!("| --- | --- | --- | --- | --- |");
    let mut worst_gap = f64::INFINITY;
    for (name, bytes) in [("text", text(size)), ("control-heavy", control_heavy(size)), ("binary", binary(size))] {
        let payloads = frame_payloads(&bytes);
        let mut rows: Vec<(String, Duration, Duration)> = Vec::new();
        let variants: &[bool] = if name == "binary" { &[false, true] } else { &[false] };
        for &b64_only in variants {
            let label = if b64_only { " (b64_only)" } else { "" };
            assert!(ours_frames(&payloads, b64_only) == serde_frames(&payloads, b64_only), "{name}: frames differ");
            let ours = median(rounds, || ours_frames(&payloads, b64_only).len());
            let serde = median(rounds, || serde_frames(&payloads, b64_only).len());
            rows.push((format!("stream frames{label}"), ours, serde));
            // The reply: the same `ExecReply` (built once, outside the timing) encoded both ways.
            let reply = reply_of(&bytes, b64_only);
            assert!(reply.to_json() == serde_json::to_vec(&reply).unwrap(), "{name}: replies differ");
            let ours = median(rounds, || reply.to_json().len());
            let serde = median(rounds, || serde_json::to_vec(&reply).unwrap_or_default().len());
            rows.push((format!("/exec reply{label}"), ours, serde));
            // The client's side: the reply body (as it arrives, in 64 KiB pieces) to stdout's exact bytes.
            let body = reply.to_json();
            assert!(read_ours(&body) == read_serde(&body), "{name}: read replies differ");
            let ours = median(rounds, || read_ours(&body).len());
            let serde = median(rounds, || read_serde(&body).len());
            rows.push((format!("reading the /exec reply{label}"), ours, serde));
        }
        for (what, ours, serde) in rows {
            let gap = serde.as_secs_f64() / ours.as_secs_f64() - 1.0;
            worst_gap = worst_gap.min(gap);
            println!(
                "| {name} ({} MiB) | {what} | {:.0} MiB/s | {:.0} MiB/s | {:.0}% |",
                size / MIB,
                rate(size, ours),
                rate(size, serde),
                gap * 100.0
            );
        }
    }
    println!();
    println!("Smallest gap: {:.0}% (a gap under 5% would mean switching to serde_json).", worst_gap * 100.0);
    // The base64 crate's engine on the same binary workload, beside a plain copy: how far from memory speed.
    let bytes = binary(size);
    let copy = median(rounds, || std::hint::black_box(bytes.clone()).len());
    let mut encoded = Vec::new();
    let encode = median(rounds, || {
        encoded.clear();
        protocol::text::append_base64(&mut encoded, &bytes);
        encoded.len()
    });
    let text = String::from_utf8(encoded.clone()).unwrap_or_default();
    let mut decoded = Vec::new();
    let decode = median(rounds, || {
        decoded.clear();
        protocol::text::append_from_base64(&mut decoded, text.as_bytes()).map_or(0, |()| decoded.len())
    });
    assert!(decoded == bytes, "base64 round trip");
    println!(
        "base64 (binary, {} MiB of bytes): encode {:.0} MiB/s, decode {:.0} MiB/s; a copy into a new buffer {:.0} MiB/s.",
        size / MIB,
        rate(size, encode),
        rate(size, decode),
        rate(size, copy)
    );
}
