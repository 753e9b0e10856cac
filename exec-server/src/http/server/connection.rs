//! One HTTP/1.1 connection: hyper serving the router, watched for its timeouts (see [`super::activity`]), closed to
//! make room for a new one, or shut down gracefully with the server.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Request, Response};
use axum::Router;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::activity::{Activity, Expiry, InFlight, Timeouts};
use super::connection_io::ConnectionIo;
use super::refusal::ServerRefusal;
use super::socket::Accepted;
use crate::metrics::HttpMetrics;

/// The largest request head (request line and headers): a request's data travels in its body; a head this large
/// is a mistake or an attack, and each connection may hold this much while it waits for the rest.
pub const MAX_HEAD: usize = 32 * 1024;
/// hyper's read and write buffers, each (its default is ~400 KiB): bounds what any connection holds in them.
const MAX_BUFFER: usize = 64 * 1024;
/// How long a connection closed for its header timeout may take to receive its 408.
const FAREWELL: Duration = Duration::from_secs(1);
/// The `endpoint` label of replies written on the connection itself, before any route (503 at the cap, 408).
pub const CONNECTION: &str = "connection";

/// Serves `stream` until the client closes it, a timeout closes it, the connection cap evicts it, or `stop` (graceful:
/// a request in flight is finished first; the caller aborts what lingers).
pub async fn serve(
    stream: Accepted,
    router: Router,
    activity: Arc<Activity>,
    timeouts: Timeouts,
    metrics: &HttpMetrics,
    stop: CancellationToken,
) {
    let connection_io = ConnectionIo::new(stream, activity.clone(), MAX_HEAD);
    let service = Service { router: TowerToHyperService::new(router), activity: activity.clone(), timeouts };
    let mut connection = http1_builder().serve_connection(TokioIo::new(connection_io), service);
    let mut stopping = false;
    loop {
        let deadline = activity.deadline(timeouts);
        tokio::select! {
            result = &mut connection => {
                match result {
                    Err(err) if err.is_parse_version_h2() => return refuse_http2(connection).await,
                    Err(err) => tracing::debug!("connection ended: {err}"),
                    Ok(()) => {}
                }
                return;
            }
            () = activity.changed() => {}
            () = sleep_until(deadline.map(|(at, _)| at)) => {
                // Look again: the phase may have changed just as the timer fired.
                match activity.deadline(timeouts) {
                    Some((at, expiry)) if at <= tokio::time::Instant::now() => {
                        if expiry == Expiry::Header {
                            metrics.request(CONNECTION, 408);
                        }
                        return expire(connection, expiry, timeouts).await;
                    }
                    _ => {}
                }
            }
            () = activity.evicted() => {
                tracing::debug!("connection closed to make room for a new one");
                // No request is in flight and none starts any more (see `Activity::try_evict`). A head that
                // completed meanwhile was refused: its 503 goes out first (within a second, so that evicted
                // connections cannot pile up descriptors). Otherwise nothing ran: close at once.
                if activity.refused_a_request() {
                    Pin::new(&mut connection).graceful_shutdown();
                    let _ = tokio::time::timeout(FAREWELL, connection).await;
                }
                return;
            }
            () = stop.cancelled(), if !stopping => {
                Pin::new(&mut connection).graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// hyper as every connection gets it (and as `connection_io`'s tests pin its automatic replies).
pub(super) fn http1_builder() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.keep_alive(true).max_buf_size(MAX_BUFFER).max_header_size(MAX_HEAD);
    builder
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

type Connection = http1::Connection<TokioIo<ConnectionIo>, Service>;

/// Closes a connection whose time ran out; a request head that came too slowly gets a 408 first, when nothing of
/// an earlier reply is still unsent.
async fn expire(connection: Connection, expiry: Expiry, timeouts: Timeouts) {
    tracing::debug!(?expiry, "connection timed out");
    if expiry != Expiry::Header {
        return;
    }
    let Some(stream) = connection.into_parts().io.into_inner().into_clean_stream() else { return };
    let seconds = timeouts.header.unwrap_or_default().as_secs_f64();
    let reply = ServerRefusal::new(
        axum::http::StatusCode::REQUEST_TIMEOUT,
        format!(
            "the request head did not arrive within {seconds} s (--header-timeout): send the request line and \
             headers at once"
        ),
    );
    farewell(stream, reply.to_http1_bytes()).await;
}

/// Answers an HTTP/2 connection preface (a client trying HTTP/2 with prior knowledge) the way HTTP/2 says "use
/// HTTP/1.1": our (empty) SETTINGS, then GOAWAY with HTTP_1_1_REQUIRED, its debug data the usual error body. hyper
/// would close such a connection without a word.
async fn refuse_http2(connection: Connection) {
    let Some(stream) = connection.into_parts().io.into_inner().into_clean_stream() else { return };
    let message = serde_json::to_vec(&protocol::ErrorBody::message(
        "this server speaks HTTP/1.1 only: send the request without HTTP/2 prior knowledge",
    ))
    .unwrap_or_default();
    const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
    const HTTP_1_1_REQUIRED: u32 = 0xd;
    let length = u32::try_from(8 + message.len()).unwrap_or(8).to_be_bytes();
    let mut frames = SETTINGS.to_vec();
    // A frame head: 24-bit length, type 7 (GOAWAY), no flags, stream 0; then the last stream id (0) and the code.
    frames.extend_from_slice(&[length[1], length[2], length[3], 7, 0, 0, 0, 0, 0]);
    frames.extend_from_slice(&0u32.to_be_bytes());
    frames.extend_from_slice(&HTTP_1_1_REQUIRED.to_be_bytes());
    frames.extend_from_slice(&message);
    farewell(stream, frames).await;
}

/// Writes a last reply on a connection outside hyper and closes it, within a second whatever the client does.
pub async fn farewell(mut stream: Accepted, reply: Vec<u8>) {
    let farewell = async {
        stream.write_all(&reply).await?;
        stream.shutdown().await?;
        // Read what the client still sends, so that closing does not reset the connection under our reply.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(FAREWELL, farewell).await;
}

/// The router as hyper calls it: each request marks the connection busy until its response body is done, and its
/// request body must arrive within the header timeout.
#[derive(Clone)]
pub struct Service {
    router: TowerToHyperService<Router>,
    activity: Arc<Activity>,
    timeouts: Timeouts,
}

type ServiceFuture = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = ServiceFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let Ok(in_flight) = self.activity.request_started() else {
            return Box::pin(std::future::ready(Ok(evicted_reply())));
        };
        let limit = self.timeouts.header;
        let request = request.map(|body| TimedBody { body, limit, deadline: None });
        let response = hyper::service::Service::call(&self.router, request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| TrackedBody { body, in_flight: Some(in_flight) }))
        })
    }
}

/// The reply to a request whose connection was evicted before it could start: nothing ran, retry on a new
/// connection.
fn evicted_reply() -> Response<TrackedBody> {
    let reply = ServerRefusal::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "this connection was closed to make room for a new one (--max-connections) before the request started; \
         nothing was run: retry on a new connection",
    );
    reply.into_response().map(|body| TrackedBody { body, in_flight: None })
}

/// A request body that must arrive within a time limit; past it, reading fails with [`BodyTimeout`] (the handler
/// answers 408).
pub struct TimedBody {
    body: Incoming,
    limit: Option<Duration>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// The request body did not arrive in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout(pub Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the request body did not arrive within {} s (--header-timeout)", self.0.as_secs_f64())
    }
}

impl std::error::Error for BodyTimeout {}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let Some(limit) = self.limit else { return Poll::Pending };
        let deadline = self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that keeps its request in flight until it is sent to the end or dropped.
pub struct TrackedBody {
    body: axum::body::Body,
    in_flight: Option<InFlight>,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            self.in_flight = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
