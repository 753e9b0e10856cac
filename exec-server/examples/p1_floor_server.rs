//! The least server there is for a forwarded command, for `bench/p1_breakdown.py`: blocking accept, a thread per
//! connection, the request's `cmd` and `cwd` spawned with std in a new process group with its output piped (as the
//! engine spawns), waited for, and one SSE reply with the exit frame. No runtime, no router, no named runs, no
//! limits, no token, no confinement, no output: nothing exec-server does beyond the spawn. With the least client
//! (sidecar-exec/examples/p1_floor.rs) it measures what two processes and a TCP connection cost by themselves, the
//! floor under any client and server. Never shipped; not a server (it trusts its one caller).
//!
//!     p1_floor_server    (prints `exec-server listening addr=127.0.0.1:PORT` on stderr)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

fn main() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    eprintln!("exec-server listening addr={} (p1_floor_server)", listener.local_addr()?);
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            if let Err(err) = serve(stream) {
                eprintln!("p1_floor_server: {err}");
            }
        });
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct Request {
    cmd: Vec<String>,
    cwd: String,
}

fn serve(mut stream: TcpStream) -> Result<(), Box<dyn std::error::Error>> {
    stream.set_nodelay(true)?;
    let body = read_request(&mut stream)?;
    let Request { cmd, cwd } = serde_json::from_slice(&body)?;
    let (program, args) = cmd.split_first().ok_or("an empty cmd")?;
    let output = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let frame =
        format!("data: {{\"type\":\"exit\",\"data\":{},\"timed_out\":false}}\n\n", output.status.code().unwrap_or(-1));
    let reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{frame}\r\n0\r\n\r\n",
        frame.len()
    );
    stream.write_all(reply.as_bytes())?;
    // Until the client closes, so that the close is its, as with exec-server.
    while stream.read(&mut [0u8; 512])? > 0 {}
    Ok(())
}

/// The request's body: the head read up to its blank line, then `content-length` bytes.
fn read_request(stream: &mut TcpStream) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let (mut seen, mut buf) = (Vec::new(), [0u8; 8192]);
    loop {
        let read = stream.read(&mut buf)?;
        if read == 0 {
            return Err("the client closed before its request was whole".into());
        }
        seen.extend_from_slice(&buf[..read]);
        let Some(end) = seen.windows(4).position(|window| window == b"\r\n\r\n") else { continue };
        let head = std::str::from_utf8(&seen[..end])?.to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .ok_or("no content-length")?
            .trim()
            .parse()?;
        if seen.len() >= end + 4 + length {
            return Ok(seen[end + 4..end + 4 + length].to_vec());
        }
    }
}
