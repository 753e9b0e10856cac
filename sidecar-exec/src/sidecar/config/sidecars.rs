//! BUILD_SIDECARS, parsed: the sidecar of each runtime, its URL checked and its token resolved ([`Endpoint`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use std::fmt;

use crate::sidecar::config::entry::SidecarEntry;
use crate::sidecar::config::token::{BearerToken, BearerTokenError};
use crate::terminal_safe::terminal_safe;

/// BUILD_SIDECARS, parsed: each runtime's entry, in the runtimes' order.
#[derive(Debug, Clone)]
pub struct Sidecars(BTreeMap<String, SidecarEntry>);

/// A builder endpoint: the sidecar one command goes to (its runtime, URL, token and socket), and how.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub runtime: String,
    /// The base URL as every message shows it ([`shown_url`]): without a password or user, and with control
    /// characters escaped.
    pub url: String,
    /// The base URL without a trailing slash (`unix:///path` for a UNIX socket), as configured: for requests only.
    base: String,
    pub token: Option<BearerToken>,
    /// The UNIX socket to connect to, for a `unix://` URL.
    pub socket: Option<PathBuf>,
}

impl Endpoint {
    /// The URL of `path` on this sidecar; over a UNIX socket the host is only a name for the Host header.
    pub fn endpoint(&self, path: &str) -> String {
        match &self.socket {
            Some(_) => format!("http://localhost{path}"),
            None => format!("{}{path}", self.base),
        }
    }
}

/// An example of BUILD_SIDECARS, for messages.
pub const EXAMPLE: &str = r#"{"node":{"internal_url":"http://builder-node:8080"}}"#;

impl Sidecars {
    /// BUILD_SIDECARS from the environment; [`SidecarsError::NotSet`] when it is unset or blank.
    pub fn from_env() -> Result<Self, SidecarsError> {
        let text = std::env::var(protocol::vars::BUILD_SIDECARS).unwrap_or_default();
        if text.trim().is_empty() {
            return Err(SidecarsError::NotSet);
        }
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, SidecarsError> {
        serde_json::from_str(text).map(Sidecars).map_err(SidecarsError::Invalid)
    }

    /// The configured runtimes, in order.
    pub fn runtimes(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn has(&self, runtime: &str) -> bool {
        self.0.contains_key(runtime)
    }

    /// The sidecar of `runtime`, with its URL checked and its token resolved.
    pub fn target(&self, runtime: &str) -> Result<Endpoint, SidecarsError> {
        let no_sidecar = || SidecarsError::NoSidecar {
            runtime: runtime.to_owned(),
            available: self.runtimes().collect::<Vec<_>>().join(", "),
        };
        let entry = self.0.get(runtime).ok_or_else(no_sidecar)?;
        let url = entry.internal_url.as_deref().unwrap_or("").trim().trim_end_matches('/');
        let bad_url = |problem| SidecarsError::BadUrl { runtime: runtime.to_owned(), url: shown_url(url), problem };
        if url.is_empty() {
            return Err(SidecarsError::NoUrl { runtime: runtime.to_owned() });
        }
        let socket = match url.strip_prefix("unix://") {
            Some(path) if path.starts_with('/') => Some(PathBuf::from(path)),
            Some(_) => return Err(bad_url(UrlProblem::RelativeSocket)),
            None => None,
        };
        if socket.is_none() && !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(bad_url(UrlProblem::Scheme));
        }
        if url.starts_with("https://") && !cfg!(feature = "tls") {
            return Err(bad_url(UrlProblem::NoTls));
        }
        let token = crate::sidecar::config::token::resolve(entry, runtime).map_err(SidecarsError::Token)?;
        Ok(Endpoint { runtime: runtime.to_owned(), url: shown_url(url), base: url.to_owned(), token, socket })
    }
}

/// A sidecar URL as a message shows it: the userinfo (`user:password@`) replaced by `…@`, since a message lands in
/// logs and an agent's context, and every control or reordering character escaped ([`terminal_safe`]), since
/// BUILD_SIDECARS is text anyone who sets the environment chose.
///
/// The userinfo is looked for where an HTTP client finds it, not only after `scheme://`: `http:///user:pw@host` and
/// `http:/user:pw@host` reach `host` with those credentials (the URL standard skips any slashes after a special
/// scheme), so their text is redacted too, whatever the slashes and backslashes before the authority.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once(':') {
        Some((scheme, rest))
            if !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            (Some(scheme), rest)
        }
        _ => (None, url),
    };
    let authority = rest.trim_start_matches(['/', '\\']);
    let authority_end = authority.find(['/', '\\', '?', '#']).unwrap_or(authority.len());
    let redacted = match (scheme, authority[..authority_end].rfind('@')) {
        (Some(scheme), Some(at)) => format!("{scheme}://…@{}", &authority[at + 1..]),
        (None, Some(at)) => format!("…@{}", &authority[at + 1..]),
        (_, None) => url.to_owned(),
    };
    terminal_safe(&redacted)
}

/// Why BUILD_SIDECARS gives no sidecar for a runtime.
#[derive(Debug)]
pub enum SidecarsError {
    /// Unset or blank.
    NotSet,
    /// Not the JSON object it must be.
    Invalid(serde_json::Error),
    NoSidecar {
        runtime: String,
        available: String,
    },
    NoUrl {
        runtime: String,
    },
    BadUrl {
        runtime: String,
        url: String,
        problem: UrlProblem,
    },
    /// The entry's token cannot be used.
    Token(BearerTokenError),
}

/// What is wrong with an entry's `internal_url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlProblem {
    /// `unix://` with a relative path.
    RelativeSocket,
    /// Neither http://, https:// nor unix://.
    Scheme,
    /// https:// in a client built without the `tls` feature.
    NoTls,
}

impl fmt::Display for SidecarsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SidecarsError::NotSet => write!(
                f,
                "BUILD_SIDECARS is not set: no build sidecar is configured for this container (expected e.g. {EXAMPLE})"
            ),
            SidecarsError::Invalid(err) => {
                write!(f, "BUILD_SIDECARS is not valid ({err}): expected a JSON object like {EXAMPLE}")
            }
            SidecarsError::NoSidecar { runtime, available } => {
                write!(f, "no sidecar available for runtime '{runtime}' (available: {available})")
            }
            SidecarsError::NoUrl { runtime } => write!(f, "BUILD_SIDECARS entry '{runtime}' has no internal_url"),
            SidecarsError::BadUrl { runtime, url, problem: UrlProblem::RelativeSocket } => write!(
                f,
                "BUILD_SIDECARS entry '{runtime}' has internal_url \"{url}\": a UNIX socket is named by its absolute \
                 path, as in unix:///run/builder/exec.sock"
            ),
            SidecarsError::BadUrl { runtime, url, problem: UrlProblem::Scheme } => write!(
                f,
                "BUILD_SIDECARS entry '{runtime}' has internal_url \"{url}\": it must start with http:// (or https://, \
                 or unix:// for a UNIX socket)"
            ),
            SidecarsError::BadUrl { runtime, url, problem: UrlProblem::NoTls } => write!(
                f,
                "BUILD_SIDECARS entry '{runtime}' has internal_url \"{url}\", but this sidecar-exec was built without \
                 TLS: use http:// (sidecars are reached over the pod's private network), or build the client with \
                 `cargo build -p sidecar-exec --features tls`"
            ),
            SidecarsError::Token(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for SidecarsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_is_checked_when_its_runtime_is_asked_for() {
        let sidecars = Sidecars::parse(
            r#"{"node":{"internal_url":"http://b:1/"},"go":{},"rs":{"internal_url":"unix://run/x.sock"},
                "py":{"internal_url":"ftp://x"},"ux":{"internal_url":"unix:///run/x.sock"}}"#,
        )
        .unwrap();
        let node = sidecars.target("node").unwrap();
        assert_eq!((node.url.as_str(), node.endpoint("/exec")), ("http://b:1", "http://b:1/exec".to_owned()));
        let unix = sidecars.target("ux").unwrap();
        assert_eq!(
            (unix.socket.as_deref(), unix.endpoint("/exec").as_str()),
            (Some("/run/x.sock".as_ref()), "http://localhost/exec")
        );
        assert!(matches!(sidecars.target("go"), Err(SidecarsError::NoUrl { .. })));
        assert!(matches!(
            sidecars.target("rs"),
            Err(SidecarsError::BadUrl { problem: UrlProblem::RelativeSocket, .. })
        ));
        assert!(matches!(sidecars.target("py"), Err(SidecarsError::BadUrl { problem: UrlProblem::Scheme, .. })));
        let Err(SidecarsError::NoSidecar { available, .. }) = sidecars.target("ruby") else { panic!() };
        assert_eq!(available, "go, node, py, rs, ux");
        assert!(matches!(Sidecars::parse("{oops"), Err(SidecarsError::Invalid(_))));
    }

    #[test]
    fn a_shown_url_has_no_password_and_no_control_character() {
        assert_eq!(shown_url("http://b:1"), "http://b:1");
        assert_eq!(shown_url("http://user:pa@ss@b:1/x@y"), "http://…@b:1/x@y");
        // The spellings an HTTP client reads as the same credentials.
        assert_eq!(shown_url("http:///user:s3cretpw@127.0.0.1:1"), "http://…@127.0.0.1:1");
        assert_eq!(shown_url("http:/user:s3cretpw@127.0.0.1:1/p"), "http://…@127.0.0.1:1/p");
        assert_eq!(shown_url("http:\\\\user:s3cretpw@b:1"), "http://…@b:1");
        assert_eq!(shown_url("user:s3cretpw@b:1"), "user://…@b:1");
        assert_eq!(shown_url("http://b:1/a@b"), "http://b:1/a@b");
        assert_eq!(shown_url("http://b\x1b[31m\0:1"), "http://b\\x1b[31m\\x00:1");
        let sidecars = Sidecars::parse(r#"{"go":{"internal_url":"http://u:secret@b:1\u001b]0;x\u0007"}}"#).unwrap();
        let target = sidecars.target("go").unwrap();
        assert_eq!(target.url, "http://…@b:1\\x1b]0;x\\x07");
        assert_eq!(target.endpoint("/exec"), "http://u:secret@b:1\x1b]0;x\x07/exec");
        let bad = Sidecars::parse(r#"{"go":{"internal_url":"ftp://u:secret@b\u001b"}}"#).unwrap();
        let line = bad.target("go").unwrap_err().to_string();
        assert!(line.contains("\"ftp://…@b\\x1b\"") && !line.contains("secret"), "{line}");
    }
}
