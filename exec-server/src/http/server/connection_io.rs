//! The socket as hyper sees it: reads tell the connection's [`Activity`] that bytes arrived, and the replies hyper
//! writes on its own, with an empty body, get a JSON one.
//!
//! hyper answers a request head it cannot parse itself, before any handler runs: 400 (a bad request line, URI,
//! version or header) or 431 (head too large), each `connection: close`, `content-length: 0`, and no way to give
//! them a body. (Its 414 needs a URI over 65 534 bytes, which is past our 32 KiB head limit: such a URI is a 431.)
//! Every other error of this server has a `{"error": …}` body, so this layer recognises those replies as they are
//! written and writes the same status with a message instead. They are unmistakable: a response head with no
//! `content-type` and an empty body, written with nothing else in flight; every reply of the router has a content
//! type, and the bodies this server sends hold no raw CR or LF (output always travels as JSON), so no body can look
//! like one.
//!
//! *Decision:* this recognises hyper's bytes, so it is pinned: `hypers_automatic_replies_are_pinned` runs the hyper
//! this server is built with, configured as every connection is, and fails on any change of those replies (a
//! header added, renamed or reordered, another status, a 414 within reach). hyper offers no hook for them, and
//! checking heads ahead of hyper would be a second parser that could disagree with it.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;
use super::socket::Accepted;

/// A connection's socket as hyper reads and writes it: reads mark the connection active, and hyper's automatic error
/// replies are rewritten with a JSON body.
pub struct ConnectionIo {
    stream: Accepted,
    activity: Arc<Activity>,
    /// The largest request head hyper accepts, for the 431 message.
    max_head: usize,
    /// A rewritten reply not yet written out.
    pending: Vec<u8>,
    /// Nothing was written since the last completed flush: the socket is free for a reply of our own.
    clean: bool,
}

impl ConnectionIo {
    pub fn new(stream: Accepted, activity: Arc<Activity>, max_head: usize) -> Self {
        ConnectionIo { stream, activity, max_head, pending: Vec::new(), clean: true }
    }

    /// The socket, if every byte written to it is out (no response, or part of one, is left unsent).
    pub fn into_clean_stream(self) -> Option<Accepted> {
        (self.clean && self.pending.is_empty()).then_some(self.stream)
    }

    /// Writes what is pending; ready once nothing is.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.pending.is_empty() {
            let written = ready!(Pin::new(&mut self.stream).poll_write(cx, &self.pending))?;
            if written == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..written);
        }
        Poll::Ready(Ok(()))
    }

    /// If `head` is one of hyper's automatic replies, queues ours instead and says so.
    fn replace(&mut self, head: &[u8]) -> bool {
        match automatic_reply(head, self.max_head) {
            Some(reply) => {
                self.pending = reply;
                self.clean = false;
                true
            }
            None => false,
        }
    }
}

impl AsyncRead for ConnectionIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = ready!(Pin::new(&mut self.stream).poll_read(cx, buf));
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        Poll::Ready(result)
    }
}

impl AsyncWrite for ConnectionIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if self.replace(buf) {
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        self.clean = false;
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(first) = bufs.iter().find(|buf| !buf.is_empty()) {
            if self.replace(first) {
                let _ = self.poll_pending(cx)?;
                return Poll::Ready(Ok(first.len()));
            }
        }
        self.clean = false;
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        ready!(Pin::new(&mut self.stream).poll_flush(cx))?;
        self.clean = true;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Our reply in place of hyper's automatic one in `head`, or `None` when `head` is not one.
fn automatic_reply(head: &[u8], max_head: usize) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?.strip_suffix("\r\n\r\n")?;
    let mut lines = rest.split("\r\n");
    let status_line = lines.next()?;
    let headers: Vec<&str> = lines.collect();
    if !headers.contains(&"content-length: 0") || headers.iter().any(|h| h.starts_with("content-type:")) {
        return None;
    }
    let message = match status_line.split(' ').next()? {
        "400" => "malformed HTTP request: its request line, a header or its framing could not be parsed \
                  (this server speaks HTTP/1.1; send e.g. POST /exec with a JSON body)"
            .to_string(),
        "431" => format!(
            "request head too large: the request line and headers may take at most {} KiB; send fewer or \
             shorter headers",
            max_head / 1024
        ),
        _ => return None,
    };
    let body = serde_json::to_vec(&protocol::ErrorBody::message(message)).ok()?;
    let mut reply = format!(
        "HTTP/1.1 {status_line}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    )
    .into_bytes();
    for header in headers.iter().filter(|h| h.starts_with("date:")) {
        reply.extend_from_slice(header.as_bytes());
        reply.extend_from_slice(b"\r\n");
    }
    reply.extend_from_slice(b"\r\n");
    reply.extend_from_slice(&body);
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_error_heads_are_replaced() {
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\
                          date: Mon, 30 Nov 2026 06:24:19 GMT\r\n\r\n";
        let reply = String::from_utf8(automatic_reply(hyper_400, 32768).unwrap()).unwrap();
        let (head, body) = reply.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())) && head.contains("\r\ndate: Mon"));
        let error: protocol::ErrorBody = serde_json::from_str(body).unwrap();
        assert!(error.error.contains("malformed HTTP request"));
        let hyper_431 =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert!(String::from_utf8(automatic_reply(hyper_431, 32768).unwrap()).unwrap().contains("at most 32 KiB"));
        // hyper cannot send its 414 here (see the module doc): one would be left alone, with hyper's empty body.
        assert!(automatic_reply(b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", 32768)
            .is_none());
        // A reply of the router, a body, a 200 or a partial head: left alone.
        for other in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            b"{\"error\":\"x\"}",
            b"0\r\n\r\n",
        ] {
            assert!(automatic_reply(other, 32768).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }

    /// What hyper, built as every connection is (`http1_builder`), writes on its own for `request`.
    async fn hypers_reply_to(request: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let service = hyper::service::service_fn(|_| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(axum::body::Body::empty()))
        });
        let connection =
            super::super::connection::http1_builder().serve_connection(hyper_util::rt::TokioIo::new(server), service);
        let served = tokio::spawn(connection);
        client.write_all(&request).await.unwrap();
        let mut reply = Vec::new();
        client.read_to_end(&mut reply).await.unwrap();
        assert!(served.await.unwrap().unwrap_err().is_parse(), "hyper took {:?}", String::from_utf8_lossy(&request));
        String::from_utf8(reply).unwrap()
    }

    /// The replies this layer rewrites, as the hyper in Cargo.lock writes them, byte for byte but the date: any
    /// change fails here before it could reach a client unrewritten.
    #[tokio::test]
    async fn hypers_automatic_replies_are_pinned() {
        let max_head = super::super::connection::MAX_HEAD;
        let cases = [
            (b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n".to_vec(), "400 Bad Request"),
            (b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "400 Bad Request"),
            (
                format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(max_head)).into_bytes(),
                "431 Request Header Fields Too Large",
            ),
            // A URI past hyper's 65 534 bytes, which would be its 414: the head limit answers first.
            (
                format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(70_000)).into_bytes(),
                "431 Request Header Fields Too Large",
            ),
        ];
        for (request, status) in cases {
            let reply = hypers_reply_to(request).await;
            let date = reply.split("\r\n").find(|line| line.starts_with("date: ")).unwrap_or_default();
            let expected = format!("HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: 0\r\n{date}\r\n\r\n");
            assert_eq!(reply, expected, "hyper's automatic reply changed");
            assert!(date.len() == "date: Mon, 30 Nov 2026 06:24:19 GMT".len(), "{reply:?}");
            let rewritten = String::from_utf8(automatic_reply(reply.as_bytes(), max_head).unwrap()).unwrap();
            assert!(rewritten.starts_with(&format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\n")));
        }
    }
}
