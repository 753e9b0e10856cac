//! `sidecar::wire::reply_reader`, the client's reader of a blocking `/exec` reply as it arrives: never more held than it
//! was fed, whatever serde_json reads as an [`ExecReply`] it reads as the same bytes however the body is cut
//! (base64 that protocol's reader refuses, it refuses too), and any reply protocol writes given back exactly.

use protocol::ExecReply;
use sidecar_exec::sidecar::wire::reply_reader::{ReplyReader, ReplyWriteError};

use crate::pieces::Cut;

/// Options byte: bit 0, the server sent `x-b64-only` (stdout is written out as it arrives, as the client does);
/// bit 1, `x-output-head` (written out only up to bits 2-7 of it, as a byte count).
pub fn check(input: &[u8]) {
    let cut = Cut::of(input);
    let b64_only = cut.options & 1 == 1;
    let head = (cut.options & 2 == 2).then_some(u64::from(cut.options >> 2));
    let reply = serde_json::from_slice::<ExecReply>(cut.body);
    let whole = read(&[cut.body], b64_only, head);
    for pieces in [cut.pieces(), cut.bytes()] {
        let read = read(&pieces, b64_only, head);
        assert_eq!(
            (read.refused, read.exit_code, &read.stdout, &read.stderr),
            (whole.refused, whole.exit_code, &whole.stdout, &whole.stderr),
            "cut into pieces, the reply reads otherwise than whole"
        );
        if let Ok(reply) = &reply {
            compare(reply, &read, b64_only, head);
        }
    }
    round_trip(&cut, b64_only, head);
}

/// What the client makes of a body: its exit code and bytes, or that it refused it.
#[derive(Debug)]
struct Read {
    /// Refused while it arrived (`feed`), or when read whole (`view`).
    refused: bool,
    exit_code: Option<i32>,
    stdout: Result<Vec<u8>, ()>,
    stderr: Result<Vec<u8>, ()>,
    /// stdout's bytes written out while the body arrived.
    written: usize,
}

fn read(pieces: &[&[u8]], b64_only: bool, head: Option<u64>) -> Read {
    let mut reader = ReplyReader::new(b64_only);
    if let Some(head) = head {
        reader = reader.write_at_most(head);
    }
    let (mut fed, mut stdout) = (0, Vec::new());
    let refused = Read { refused: true, exit_code: None, stdout: Err(()), stderr: Err(()), written: 0 };
    for piece in pieces {
        fed += piece.len();
        if reader.feed(piece).is_err() {
            return refused;
        }
        assert!(reader.held() <= fed, "holds {} bytes after being fed {fed}", reader.held());
        if b64_only {
            reader.write_output(&mut stdout).expect("a Vec takes every write");
            assert_eq!(reader.written(), stdout.len() as u64);
            assert!(head.is_none_or(|head| reader.written() <= head), "wrote past the head the server cut at");
        }
    }
    let written = stdout.len();
    let reply = reader.finish();
    let Ok(view) = reply.view() else { return refused };
    let mut stderr = Vec::new();
    let bytes = |result: Result<(), ReplyWriteError>| match result {
        Ok(()) => Ok(()),
        Err(ReplyWriteError::Invalid) => Err(()),
        Err(ReplyWriteError::Write(error)) => panic!("a Vec refused a write: {error}"),
    };
    let stdout = bytes(view.write_stdout(&mut stdout)).map(|()| stdout);
    let stderr = bytes(view.write_stderr(&mut stderr)).map(|()| stderr);
    Read { refused: false, exit_code: Some(view.exit_code), stdout, stderr, written }
}

/// A reply serde_json reads is read alike: the same exit code, and the same bytes, or refused where serde_json's
/// bytes do not decode. The one refusal allowed beyond that: a server that sent `x-b64-only` and lossy text beside
/// stdout's base64 anyway broke its word, and the text may already be out.
fn compare(reply: &ExecReply, read: &Read, b64_only: bool, head: Option<u64>) {
    let broken_word = b64_only && reply.output_b64.is_some() && !reply.output.is_empty();
    if broken_word && (read.refused || read.stdout.is_err()) {
        return;
    }
    // stdout's base64, decoded as it arrives, is refused with the whole reply when it does not decode.
    if read.refused && reply.stdout_bytes().is_err() {
        return;
    }
    assert!(!read.refused, "refused a reply serde_json reads: {reply:?}");
    assert_eq!(read.exit_code, Some(reply.exit_code));
    let expected = |bytes: Result<std::borrow::Cow<'_, [u8]>, _>| bytes.map(|bytes| bytes.into_owned()).map_err(|_| ());
    assert_eq!(read.stdout, expected(reply.stdout_bytes()), "stdout of {reply:?}");
    assert_eq!(read.stderr, expected(reply.stderr_bytes()), "stderr of {reply:?}");
    if let (Ok(stdout), Some(head)) = (&read.stdout, head) {
        assert!(read.written as u64 <= head && read.written <= stdout.len());
    }
}

/// A reply protocol writes (`ExecReply::to_json`, exec-server's layout) of the body as stdout and its reverse as
/// stderr, exact bytes (lossy text and base64 when they are not UTF-8; only base64 with `x-b64-only`, as a server
/// that sent it writes), read back in pieces cut alike.
fn round_trip(cut: &Cut<'_>, b64_only: bool, head: Option<u64>) {
    let reversed: Vec<u8> = cut.body.iter().rev().copied().collect();
    let (mut output, output_b64) = protocol::text::encode(cut.body);
    if b64_only && output_b64.is_some() {
        output.clear();
    }
    let (stderr, stderr_b64) = protocol::text::encode(&reversed);
    let code = i32::from_le_bytes([cut.body.first().copied().unwrap_or(0), cut.options, 0, 0]) - 30_000;
    let reply = ExecReply { exit_code: code, output, output_b64, stderr, stderr_b64, ..ExecReply::default() };
    let json = reply.to_json();
    let read = read(&cut.split(&json), b64_only, head);
    assert!(!read.refused, "refused what protocol wrote: {reply:?}");
    assert_eq!(read.exit_code, Some(code));
    assert_eq!(read.stdout.as_deref(), Ok(cut.body), "stdout read back otherwise");
    assert_eq!(read.stderr.as_deref(), Ok(reversed.as_slice()), "stderr read back otherwise");
}
