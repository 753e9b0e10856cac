//! The frames: written, batched and read back both ways (the fast reader and serde's derived one must agree).

use super::*;

fn encode_all(pieces: &[&[u8]], max: usize) -> Vec<Frame> {
    let mut encoder = FrameEncoder::new(StreamKind::Stdout, max);
    let mut events = Vec::new();
    for piece in pieces {
        encoder.push(piece, &mut events);
    }
    encoder.flush(&mut events);
    events.iter().map(|event| parse_event(event)).collect()
}

/// An event's frame, read both ways (the fast reader and serde's derived one must agree).
fn parse_event(event: &[u8]) -> Frame {
    let json = event.strip_prefix(b"data: ").unwrap().strip_suffix(b"\n\n").unwrap();
    assert!(!json.contains(&b'\n') && !json.contains(&b'\r'), "an event must be one line");
    let derived: Frame = serde_json::from_slice(json).unwrap();
    let fast = Frame::from_json(json).unwrap().unwrap();
    assert_eq!(derived, fast);
    derived
}

fn rebuild(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        if let Frame::Stdout(chunk) = frame {
            chunk.write_bytes(&mut out).unwrap();
        }
    }
    out
}

/// What the contract's client prints: each frame's data and a newline.
fn print_like_old_client(frames: &[Frame]) -> String {
    frames.iter().map(|f| if let Frame::Stdout(c) = f { format!("{}\n", c.data) } else { String::new() }).collect()
}

#[test]
fn complete_lines_batch_into_one_frame_with_the_last_newline_implied() {
    let frames = encode_all(&[b"a\nb\n"], 1024);
    assert_eq!(frames, [Frame::Stdout(Chunk { data: "a\nb".into(), nl: true, b64: None, offset: None })]);
    assert_eq!(serde_json::to_string(&frames[0]).unwrap(), r#"{"type":"stdout","data":"a\nb"}"#);
    let mut events = Vec::new();
    FrameEncoder::new(StreamKind::Stdout, 1024).push(b"a\nb\n", &mut events);
    assert_eq!(events, [b"data: {\"type\":\"stdout\",\"data\":\"a\\nb\"}\n\n".to_vec()]);
    assert_eq!(print_like_old_client(&frames), "a\nb\n");
}

#[test]
fn missing_final_newline_and_crlf_survive() {
    let input: &[&[u8]] = &[b"one\r\ntw", b"o\r\nthree"];
    let frames = encode_all(input, 1024);
    assert_eq!(rebuild(&frames), b"one\r\ntwo\r\nthree");
    assert!(matches!(&frames[2], Frame::Stdout(c) if !c.nl && c.data == "three"));
}

#[test]
fn long_lines_are_cut_without_splitting_a_character() {
    let line = "é".repeat(10); // 20 bytes
    let frames = encode_all(&[line.as_bytes()], 7);
    assert!(frames.iter().all(|f| matches!(f, Frame::Stdout(c) if c.b64.is_none())), "{frames:?}");
    assert_eq!(rebuild(&frames), line.as_bytes());
}

#[test]
fn binary_bytes_round_trip_exactly() {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    let pieces: Vec<&[u8]> = bytes.chunks(333).collect();
    let frames = encode_all(&pieces, 1000);
    assert_eq!(rebuild(&frames), bytes);
    assert!(frames.iter().any(|f| matches!(f, Frame::Stdout(c) if c.b64.is_some())));
}

/// A client that reads `b64` gets the same bytes without the lossy twin; text frames are unchanged.
#[test]
fn b64_only_frames_leave_out_the_lossy_twin_and_keep_the_bytes() {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).chain(*b"\nplain line\n").collect();
    let pieces: Vec<&[u8]> = bytes.chunks(333).collect();
    let encode = |b64_only: bool| {
        let mut encoder = FrameEncoder::new(StreamKind::Stdout, 1000).b64_only(b64_only);
        let mut events = Vec::new();
        for piece in &pieces {
            encoder.push(piece, &mut events);
        }
        encoder.flush(&mut events);
        events
    };
    let (twin, only) = (encode(false), encode(true));
    assert_eq!(twin.len(), only.len());
    let frames: Vec<Frame> = only.iter().map(|event| parse_event(event)).collect();
    assert_eq!(rebuild(&frames), bytes);
    for (with, without) in twin.iter().zip(&only) {
        match parse_event(without) {
            Frame::Stdout(Chunk { data, b64: Some(_), .. }) => {
                assert_eq!(data, "");
                assert!(without.len() < with.len());
            }
            _ => assert_eq!(with, without, "a frame of text is the same either way"),
        }
    }
    assert!(frames.iter().any(|f| matches!(f, Frame::Stdout(c) if c.b64.is_some())));
}

#[test]
fn contract_frames_without_nl_mean_one_line() {
    let frame: Frame = serde_json::from_str(r#"{"type":"stdout","data":"hi"}"#).unwrap();
    assert_eq!(rebuild(&[frame]), b"hi\n");
    let exit: Frame = serde_json::from_str(r#"{"type":"exit","data":3}"#).unwrap();
    assert_eq!(
        exit,
        Frame::Exit {
            data: 3,
            timed_out: false,
            signal: None,
            duration_ms: 0,
            stdout_bytes: None,
            stderr_bytes: None,
            stopped_by: None,
            stdin_consumed: None,
        }
    );
    assert_eq!(Frame::from_json(br#"{"type":"exit","data":3}"#).unwrap(), Some(exit));
    assert_eq!(Frame::from_json(br#"{"type":"progress","data":50}"#).unwrap(), None);
    assert!(Frame::from_json(br#"{"type":"exit"}"#).is_err());
    let error = Frame::Error { data: "timed out".into(), start_error: None };
    assert_eq!(error.to_event(), b"data: {\"type\":\"error\",\"data\":\"timed out\"}\n\n");
    assert_eq!(parse_event(&error.to_event()), error);
}

#[test]
fn frames_of_a_named_run_carry_offsets_that_count_every_byte() {
    let bytes: Vec<u8> = b"ab\ncd\xff\nlong-line-without-end".to_vec();
    let mut encoder = FrameEncoder::new(StreamKind::Stderr, 8).with_offsets(100);
    let mut events = Vec::new();
    encoder.push(&bytes[..4], &mut events);
    encoder.push(&bytes[4..], &mut events);
    assert_eq!(encoder.next_offset(), Some(100 + bytes.len() as u64));
    encoder.flush(&mut events);
    let frames: Vec<Frame> = events.iter().map(|event| parse_event(event)).collect();
    let mut expected = 100;
    let mut rebuilt = Vec::new();
    for frame in &frames {
        let Frame::Stderr(chunk) = frame else { panic!("{frame:?}") };
        assert_eq!(chunk.offset, Some(expected), "{frames:?}");
        let before = rebuilt.len();
        chunk.write_bytes(&mut rebuilt).unwrap();
        expected += (rebuilt.len() - before) as u64;
    }
    assert_eq!(rebuilt, bytes);
    assert_eq!(events[0], b"data: {\"type\":\"stderr\",\"data\":\"ab\",\"offset\":100}\n\n".to_vec());
    encoder.jump_to(500);
    encoder.push(b"x\n", &mut events);
    assert!(matches!(parse_event(events.last().unwrap()), Frame::Stderr(Chunk { offset: Some(500), .. })));
}

#[test]
fn frames_without_offsets_keep_their_bytes() {
    let mut events = Vec::new();
    FrameEncoder::new(StreamKind::Stdout, 4).push(b"\xffabcdef\n", &mut events);
    assert!(events.iter().all(|event| !event.windows(8).any(|w| w == b"\"offset\"")), "{events:?}");
    let exit = Frame::Exit {
        data: 0,
        timed_out: false,
        signal: None,
        duration_ms: 5,
        stdout_bytes: None,
        stderr_bytes: None,
        stopped_by: None,
        stdin_consumed: None,
    };
    assert_eq!(exit.to_event(), b"data: {\"type\":\"exit\",\"data\":0,\"timed_out\":false,\"duration_ms\":5}\n\n");
}

#[test]
fn dropped_frames_and_exit_totals_round_trip() {
    let dropped = Frame::Dropped { stream: StreamKind::Stdout, offset: 10, bytes: 20 };
    assert_eq!(
        dropped.to_event(),
        b"data: {\"type\":\"dropped\",\"stream\":\"stdout\",\"offset\":10,\"bytes\":20}\n\n"
    );
    assert_eq!(parse_event(&dropped.to_event()), dropped);
    let exit = Frame::Exit {
        data: 1,
        timed_out: false,
        signal: None,
        duration_ms: 5,
        stdout_bytes: Some(7),
        stderr_bytes: Some(0),
        stopped_by: Some(crate::StoppedBy::ReattachWindow),
        stdin_consumed: None,
    };
    assert!(exit.to_event().ends_with(b",\"stopped_by\":\"reattach_window\"}\n\n"));
    assert_eq!(parse_event(&exit.to_event()), exit);
    let Frame::Exit { data, timed_out, signal, duration_ms, stdout_bytes, stderr_bytes, stopped_by, .. } = exit else {
        unreachable!()
    };
    let consumed = Frame::Exit {
        data,
        timed_out,
        signal,
        duration_ms,
        stdout_bytes,
        stderr_bytes,
        stopped_by,
        stdin_consumed: Some(12),
    };
    assert!(consumed.to_event().ends_with(b",\"stopped_by\":\"reattach_window\",\"stdin_consumed\":12}\n\n"));
    assert_eq!(parse_event(&consumed.to_event()), consumed);
    let newer = Frame::from_json(br#"{"type":"exit","data":1,"stopped_by":"oom"}"#).unwrap();
    assert!(matches!(newer, Some(Frame::Exit { stopped_by: Some(crate::StoppedBy::Other), .. })), "{newer:?}");
    assert!(Frame::from_json(br#"{"type":"dropped","stream":"stdin","offset":1,"bytes":2}"#).is_err());
    assert!(Frame::from_json(br#"{"type":"dropped","stream":"stdout","bytes":2}"#).is_err());
}

/// A start error's kind rides in the error frame; a kind this version does not know reads as `other`.
#[test]
fn error_frames_carry_the_start_error_kind() {
    let frame = Frame::Error {
        data: "failed to start command: x: not found".into(),
        start_error: Some(crate::StartErrorKind::NotFound),
    };
    assert_eq!(
        frame.to_event(),
        b"data: {\"type\":\"error\",\"data\":\"failed to start command: x: not found\",\"start_error\":\"not_found\"}\n\n"
    );
    assert_eq!(parse_event(&frame.to_event()), frame);
    let newer = Frame::from_json(br#"{"type":"error","data":"x","start_error":"quota"}"#).unwrap();
    assert_eq!(newer, Some(Frame::Error { data: "x".into(), start_error: Some(crate::StartErrorKind::Other) }));
}

/// A field the frame's type does not have is ignored whatever it holds and however often it comes, as serde's
/// derived reader ignores it (the fuzz target `frames` found an error frame with a string `bytes` refused);
/// a field the type has is still read strictly.
#[test]
fn fields_of_other_frame_types_are_ignored_as_serde_ignores_them() {
    for json in [
        &br#"{"type":"error","data":"x","bytes":"stdout","nl":[1],"timed_out":"no"}"#[..],
        br#"{"type":"stdout","data":"hi","timed_out":1,"timed_out":2,"stream":{}}"#,
        br#"{"type":"dropped","stream":"stdout","offset":1,"bytes":2,"data":{"a":[1,null]},"data":true}"#,
        br#"{"type":"exit","data":0,"offset":"far","b64":7,"start_error":5}"#,
        br#"{"d\u0061ta":"hi","type":"std\u006fut","newer":{"deep":[[]]}}"#,
    ] {
        let derived: Frame = serde_json::from_slice(json).unwrap();
        assert_eq!(Frame::from_json(json).unwrap(), Some(derived), "{}", String::from_utf8_lossy(json));
    }
    for (json, says) in [
        (&br#"{"type":"stdout","data":"a","data":"b"}"#[..], "duplicate field `data`"),
        (br#"{"type":"stdout","data":"a","nl":"no"}"#, "`nl`"),
        (br#"{"type":"stdout","data":null}"#, "data must be a string"),
        (br#"{"type":"exit","data":0,"signal":"TERM"}"#, "`signal`"),
        (br#"{"type":"exit","data":0,"timed_out":true,"timed_out":false}"#, "duplicate field `timed_out`"),
        (br#"{"type":"exit","data":1.5}"#, "integer `data`"),
        (br#"{"type":"dropped","stream":"stdout","bytes":2}"#, "needs `offset`"),
        (br#"{"data":"hi"}"#, "missing field `type`"),
        (br#"{"type":"stdout","type":"stdout"}"#, "duplicate field `type`"),
        (br#"["stdout","hi"]"#, "a JSON object"),
    ] {
        let error = Frame::from_json(json).unwrap_err().to_string();
        assert!(error.contains(says), "{}: {error}", String::from_utf8_lossy(json));
    }
}
