//! The HTTP client every call uses, and the one-line messages for what can go wrong on the wire: transport errors
//! and the server's refusals (401, redirects, a cwd outside the workspace, anything else it answers).

use std::time::Duration;

use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::terminal_safe::terminal_safe;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The client for one sidecar (`socket`: its UNIX socket, for a `unix://` URL), with `read_timeout` on every read
/// when given. It never follows a redirect: that would re-send the command and the passed-through environment
/// (tokens, often) to wherever the server points, and a sidecar has no reason to redirect.
pub fn http_client(
    read_timeout: Option<Duration>,
    socket: Option<&std::path::Path>,
) -> Result<reqwest::Client, ClientSetupError> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .user_agent(concat!("sidecar-exec/", env!("CARGO_PKG_VERSION")));
    if let Some(read_timeout) = read_timeout {
        builder = builder.read_timeout(read_timeout);
    }
    if let Some(socket) = socket {
        builder = builder.unix_socket(socket);
    }
    builder.build().map_err(ClientSetupError)
}

/// The HTTP client could not be built (its TLS or resolver set-up failed).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the HTTP client: {0}")]
pub struct ClientSetupError(reqwest::Error);

/// `request` with what every call to a sidecar carries: the bearer token and, for a command's calls, the trace headers
/// (`settings`).
pub fn authorized(
    mut request: reqwest::RequestBuilder,
    target: &Endpoint,
    settings: Option<&CallSettings>,
) -> reqwest::RequestBuilder {
    if let Some(token) = &target.token {
        request = request.bearer_auth(&token.value);
    }
    for (header, value) in settings.map(|s| s.trace_headers.as_slice()).unwrap_or_default() {
        // A value no header can hold is left out rather than failing the call.
        if let Ok(value) = reqwest::header::HeaderValue::from_str(value) {
            request = request.header(*header, value);
        }
    }
    request
}

pub fn transport_error(target: &Endpoint, err: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut cause = String::new();
    let mut source = err.source();
    while let Some(inner) = source {
        cause = terminal_safe(&inner.to_string());
        source = inner.source();
    }
    // reqwest names the URL it was sending to, user and password included: the message names the sidecar's shown
    // URL instead (see `Endpoint::url`).
    let mut text = err.to_string();
    if let Some(at) = text.find(" for url (") {
        text.truncate(at);
    }
    if err.is_connect() {
        format!(
            "failed to connect to sidecar at {}: {cause} (is the {} builder running and reachable?)",
            target.url, target.runtime
        )
    } else if err.is_timeout() {
        format!("request to sidecar at {} timed out: {cause}", target.url)
    } else if cause.is_empty() {
        format!("request to sidecar at {} failed: {text}", target.url)
    } else {
        format!("request to sidecar at {} failed: {text}: {cause}", target.url)
    }
}

/// The redirect target of a 3xx reply, as sent (shown safely by [`refusal`]).
pub fn location(response: &reqwest::Response) -> Option<String> {
    let value = response.headers().get(reqwest::header::LOCATION)?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Why a request was refused: the message for a reply that is not 2xx. `body` is the error body (already cut to a
/// bounded size); whatever the server wrote is shown escaped and cut (see [`terminal_safe`]).
pub fn refusal(
    target: &Endpoint,
    settings: Option<&CallSettings>,
    status: reqwest::StatusCode,
    location: Option<&str>,
    body: &str,
) -> String {
    let url = &target.url;
    if status.is_redirection() {
        return format!(
            "sidecar at {url} answered {status}, redirecting to {}: sidecar-exec never follows redirects (it would \
             send the command and its environment to another address); put the server's own address in \
             BUILD_SIDECARS",
            terminal_safe(location.unwrap_or("(no Location)"))
        );
    }
    if status == reqwest::StatusCode::UNAUTHORIZED {
        // The client knows what it sent and from where; the server's own hint is written for any caller.
        let sent = match &target.token {
            None => "no token was sent".to_owned(),
            Some(token) => format!("the token from {} was refused", token.source),
        };
        return format!(
            "sidecar at {url} answered {status}: {sent}; set SIDECAR_TOKEN or SIDECAR_TOKEN_FILE (or \"token\" / \
             \"token_file\" in the BUILD_SIDECARS entry) to the server's token"
        );
    }
    let detail = serde_json::from_str::<protocol::ErrorBody>(body).map_or_else(|_| body.trim().to_owned(), |b| b.error);
    let mut message = format!("sidecar at {url} answered {status}: {}", terminal_safe(&detail));
    // Error bodies carry no code, so the text is the only sign; without it (another server) there is just no hint.
    if status == reqwest::StatusCode::BAD_REQUEST && detail.contains("outside the workspace") {
        if let Some(settings) = settings {
            message.push_str(&if settings.cwd_from_env {
                format!(
                    "; on this side: SIDECAR_CWD={} is outside it, so unset SIDECAR_CWD (the current directory is \
                     sent instead) or point it inside the workspace",
                    terminal_safe(&settings.cwd)
                )
            } else {
                "; on this side: cd into the workspace before running the command, or set SIDECAR_CWD to a \
                 directory inside it"
                    .to_owned()
            });
        }
    }
    message
}
