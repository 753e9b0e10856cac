//! The least a forwarded call can do, for `bench/p1_breakdown.py`: one blocking HTTP/1.1 request on a new TCP
//! connection (std only: no runtime, no HTTP client, no settings, no stdin, no signals), the same body the client
//! sends for `true` (a fresh run id), read until the exit frame, exit with its code. Against the same server, what
//! sidecar-exec costs beyond this is what any client stack could still save; what this costs beyond native `true` is
//! the server's part and the second process. Never shipped; not a client (it parses only what it needs).
//!
//!     P1_FLOOR_ADDR=127.0.0.1:PORT p1_floor    (run in the server's workspace: the cwd is sent)

use std::io::{Read, Write};

const EXIT_FRAME: &[u8] = br#""type":"exit","data":"#;

fn main() {
    std::process::exit(match call() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("p1_floor: {err}");
            1
        }
    });
}

fn call() -> Result<i32, Box<dyn std::error::Error>> {
    let addr = std::env::var("P1_FLOOR_ADDR")?;
    let cwd = std::env::current_dir()?;
    let mut id = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut id)?;
    let run_id: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
    let body = serde_json::json!({
        "cmd": ["true"], "cwd": cwd, "timeout": 600, "env": {}, "b64_only": true, "run_id": run_id,
    })
    .to_string();
    let request = format!(
        "POST /exec HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream, application/json;q=0.5\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(&addr)?;
    stream.set_nodelay(true)?;
    stream.write_all(request.as_bytes())?;
    let (mut seen, mut buf) = (Vec::new(), [0u8; 8192]);
    loop {
        let read = stream.read(&mut buf)?;
        if read == 0 {
            return Err("the server closed before the exit frame".into());
        }
        seen.extend_from_slice(&buf[..read]);
        let Some(at) = seen.windows(EXIT_FRAME.len()).position(|window| window == EXIT_FRAME) else { continue };
        let code = &seen[at + EXIT_FRAME.len()..];
        // The code is whole once the field after it has begun.
        let Some(end) = code.iter().position(|&b| b == b',') else { continue };
        return Ok(std::str::from_utf8(&code[..end])?.trim().parse()?);
    }
}
