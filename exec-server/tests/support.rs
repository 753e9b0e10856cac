//! Test helpers: a server builder, request helpers, a raw SSE reader, process markers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use clap::Parser;
use exec_server::in_process::InProcessServer;
use exec_server::Config;
use protocol::{ExecReply, Frame};
pub use testkit::*;

pub struct TestServer {
    pub server: Option<InProcessServer>,
    pub url: String,
    pub addr: std::net::SocketAddr,
    pub workspace: tempfile::TempDir,
    pub token: Option<String>,
}

/// Builder for an in-process server on a fresh temporary workspace.
pub struct ServerBuilder {
    args: Vec<String>,
    token: Option<String>,
}

pub fn server() -> ServerBuilder {
    ServerBuilder { args: vec!["--grace".into(), "0.5".into()], token: None }
}

impl ServerBuilder {
    pub fn arg(mut self, flag: &str, value: &str) -> Self {
        self.args.push(flag.into());
        self.args.push(value.into());
        self
    }

    pub fn flag(mut self, flag: &str) -> Self {
        self.args.push(flag.into());
        self
    }

    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.into());
        self
    }

    pub async fn start(self) -> TestServer {
        let _ = exec_server::engine::become_subreaper();
        let workspace = tempfile::tempdir().unwrap();
        let mut args = vec!["exec-server".to_string(), "--cwd".into(), workspace.path().display().to_string()];
        args.extend(self.args);
        let mut config = Config::parse_from(args);
        config.token = self.token.clone();
        let server = InProcessServer::start(config).await.unwrap();
        TestServer { url: server.url.clone(), addr: server.addr, server: Some(server), workspace, token: self.token }
    }
}

impl TestServer {
    pub fn client(&self) -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    pub fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
        let request = self.client().post(format!("{}{path}", self.url)).body(body);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// POST /exec and the parsed reply (asserting 200).
    pub async fn exec(&self, request: serde_json::Value) -> ExecReply {
        let response = self.post("/exec", request.to_string()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }

    /// POST /exec/stream and every frame, read to the end.
    pub async fn stream(&self, request: serde_json::Value) -> Vec<Frame> {
        let response = self.post("/exec/stream", request.to_string()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let body = String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap();
        parse_sse(&body)
    }

    /// Waits until `POST /exec` of `true` is answered 200 (a `--max-concurrent` slot is free); panics after 5 s.
    pub async fn wait_for_a_free_slot(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let response = self.post("/exec", serde_json::json!({"cmd": ["true"]}).to_string()).send().await.unwrap();
            if response.status() == 200 {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "no slot came free");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(mut self) {
        self.server.take().unwrap().stop().await.unwrap();
    }
}

/// Every `data:` line of an SSE body as a frame.
pub fn parse_sse(body: &str) -> Vec<Frame> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|err| panic!("bad frame {data}: {err}")))
        .collect()
}

/// The exact bytes of stdout (or stderr) carried by `frames`.
pub fn rebuild(frames: &[Frame], want_stdout: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        match (frame, want_stdout) {
            (Frame::Stdout(chunk), true) | (Frame::Stderr(chunk), false) => chunk.write_bytes(&mut out).unwrap(),
            _ => {}
        }
    }
    out
}

pub fn exit_frame(frames: &[Frame]) -> (i32, bool, Option<i32>) {
    match frames.last() {
        Some(Frame::Exit { data, timed_out, signal, .. }) => (*data, *timed_out, *signal),
        other => panic!("last frame is not exit: {other:?}"),
    }
}

/// A raw HTTP/1.1 POST on a plain socket, for tests that must control the connection itself.
pub fn raw_post(addr: std::net::SocketAddr, path: &str, body: &str) -> BufReader<TcpStream> {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        socket,
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    BufReader::new(socket)
}

/// A raw HTTP/1.1 GET on a plain socket, left to the test to read (or not).
pub fn raw_get(addr: std::net::SocketAddr, path: &str) -> BufReader<TcpStream> {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(socket, "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").unwrap();
    BufReader::new(socket)
}

/// A whole raw HTTP/1.1 exchange on a plain socket (`Connection: close`), with a bearer token if given: for tests
/// that need no async runtime, or must see the response exactly as sent.
pub fn raw_request(addr: std::net::SocketAddr, method: &str, path: &str, token: Option<&str>, body: &str) -> String {
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let auth = token.map(|token| format!("Authorization: Bearer {token}\r\n")).unwrap_or_default();
    raw_exchange(socket, method, path, &auth, body)
}

/// [`raw_request`] on any stream (a UNIX socket too), with `headers` as given (lines ending in CRLF).
pub fn raw_exchange(mut stream: impl Read + Write, method: &str, path: &str, headers: &str, body: &str) -> String {
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{headers}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Reads lines until one contains `needle`.
pub fn read_until(reader: &mut BufReader<TcpStream>, needle: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "connection closed before {needle:?}");
        if line.contains(needle) {
            return;
        }
    }
}

/// Reads a whole chunked or close-delimited HTTP response body from a raw socket (tests only need the text).
pub fn read_all(reader: &mut BufReader<TcpStream>) -> String {
    let mut text = String::new();
    let _ = reader.read_to_string(&mut text);
    text
}

/// Every sample of an exposition as `name{labels}` → value.
pub fn samples(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect()
}

pub async fn scrape(server: &TestServer, token: Option<&str>) -> (u16, std::collections::HashMap<String, f64>) {
    let mut request = server.client().get(format!("{}/metrics", server.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        return (status, std::collections::HashMap::new());
    }
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
    (status, samples(&response.text().await.unwrap()))
}

pub fn value(samples: &std::collections::HashMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| panic!("no sample {series}"))
}
