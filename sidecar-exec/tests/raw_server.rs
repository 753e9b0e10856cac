//! A raw HTTP server for tests that need a broken or hostile sidecar: it answers every request with bytes the test
//! chooses (any status, headers, endless bodies), which no well-behaved server framework would send.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the raw server sends back: a status line with headers, then a body written in pieces.
pub struct Reply {
    head: String,
    body: Vec<Piece>,
}

pub enum Piece {
    Bytes(Vec<u8>),
    /// `count` copies of `byte`, written 64 KiB at a time without ever being held whole.
    Repeat {
        byte: u8,
        count: u64,
    },
    /// The same byte until the peer goes away.
    Endless(u8),
    /// Nothing until the test says (`notify_one`), then the next piece.
    Wait(Arc<tokio::sync::Notify>),
}

impl Reply {
    /// A complete reply with a Content-Length.
    pub fn full(status: &str, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Self {
        let body = body.into();
        let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        Reply { head, body: vec![Piece::Bytes(body)] }
    }

    /// A 200 reply that announces `declared` body bytes and sends only `body`: a reply cut on its way.
    pub fn cut(content_type: &str, declared: usize, body: impl Into<Vec<u8>>) -> Self {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {declared}\r\n");
        Reply { head, body: vec![Piece::Bytes(body.into())] }
    }

    /// A 200 reply of `content_type` whose body ends when the connection does.
    pub fn until_close(content_type: &str, body: Vec<Piece>) -> Self {
        Reply { head: format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n"), body }
    }

    /// The same reply with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.head.push_str(&format!("{name}: {value}\r\n"));
        self
    }

    pub fn json(body: &str) -> Self {
        Reply::full("200 OK", &[("content-type", "application/json")], body)
    }
}

/// A one-file HTTP server on 127.0.0.1:0 that answers every request with `reply(request text)`. It counts the
/// requests it got and the body bytes the client accepted.
pub struct RawServer {
    pub url: String,
    pub requests: Arc<AtomicUsize>,
    pub written: Arc<AtomicU64>,
}

pub async fn raw_server(reply: impl Fn(&str) -> Reply + Send + Sync + 'static) -> RawServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let written = Arc::new(AtomicU64::new(0));
    let reply = Arc::new(reply);
    let (count, total) = (requests.clone(), written.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (reply, count, total) = (reply.clone(), count.clone(), total.clone());
            tokio::spawn(async move {
                let Some(request) = read_request(&mut socket).await else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let Reply { head, body } = reply(&request);
                if socket.write_all(format!("{head}\r\n").as_bytes()).await.is_err() {
                    return;
                }
                for piece in body {
                    let (block, mut left) = match piece {
                        Piece::Wait(go) => {
                            go.notified().await;
                            continue;
                        }
                        Piece::Bytes(bytes) => {
                            let len = bytes.len() as u64;
                            (bytes, len)
                        }
                        Piece::Repeat { byte, count } => (vec![byte; 64 * 1024], count),
                        Piece::Endless(byte) => (vec![byte; 64 * 1024], u64::MAX),
                    };
                    while left > 0 {
                        let n = left.min(block.len() as u64) as usize;
                        if socket.write_all(&block[..n]).await.is_err() {
                            return;
                        }
                        total.fetch_add(n as u64, Ordering::SeqCst);
                        left -= n as u64;
                    }
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    RawServer { url, requests, written }
}

/// The request's head and body as text (bodies are JSON here).
pub async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut data = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |value| value.trim().parse().unwrap_or(0));
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    Some(String::from_utf8_lossy(&data).into_owned())
}
