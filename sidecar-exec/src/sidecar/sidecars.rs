//! BUILD_SIDECARS, parsed: the sidecar of each runtime, its URL checked and its token resolved ([`Target`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::config_error::ConfigError;
use crate::sidecar::token::Token;

/// One entry of BUILD_SIDECARS. Only `internal_url` is in the contract; the token fields are ours.
#[derive(Debug, Clone, Deserialize)]
pub struct SidecarEntry {
    pub internal_url: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}

/// BUILD_SIDECARS, parsed.
#[derive(Debug, Clone)]
pub struct Sidecars(pub BTreeMap<String, SidecarEntry>);

/// Where one command goes and how.
#[derive(Debug, Clone)]
pub struct Target {
    pub runtime: String,
    /// Base URL without a trailing slash (`unix:///path` for a UNIX socket), as configured: for messages.
    pub url: String,
    pub token: Option<Token>,
    /// The UNIX socket to connect to, for a `unix://` URL.
    pub socket: Option<PathBuf>,
}

impl Target {
    /// The URL of `path` on this sidecar; over a UNIX socket the host is only a name for the Host header.
    pub fn endpoint(&self, path: &str) -> String {
        match &self.socket {
            Some(_) => format!("http://localhost{path}"),
            None => format!("{}{path}", self.url),
        }
    }
}

pub const EXAMPLE: &str = r#"{"node":{"internal_url":"http://builder-node:8080"}}"#;

impl Sidecars {
    pub fn from_env() -> Result<Self, ConfigError> {
        let text = std::env::var("BUILD_SIDECARS").unwrap_or_default();
        if text.trim().is_empty() {
            return Err(ConfigError(format!(
                "BUILD_SIDECARS is not set: no build sidecar is configured for this container (expected e.g. {EXAMPLE})"
            )));
        }
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text).map(Sidecars).map_err(|err| {
            ConfigError(format!("BUILD_SIDECARS is not valid ({err}): expected a JSON object like {EXAMPLE}"))
        })
    }

    pub fn runtimes(&self) -> String {
        self.0.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    /// The sidecar of `runtime`, with its URL checked and its token resolved.
    pub fn target(&self, runtime: &str) -> Result<Target, ConfigError> {
        let entry = self.0.get(runtime).ok_or_else(|| {
            ConfigError(format!("no sidecar available for runtime '{runtime}' (available: {})", self.runtimes()))
        })?;
        let url = entry.internal_url.as_deref().unwrap_or("").trim().trim_end_matches('/');
        if url.is_empty() {
            return Err(ConfigError(format!("BUILD_SIDECARS entry '{runtime}' has no internal_url")));
        }
        let socket = match url.strip_prefix("unix://") {
            Some(path) if path.starts_with('/') => Some(PathBuf::from(path)),
            Some(_) => {
                return Err(ConfigError(format!(
                    "BUILD_SIDECARS entry '{runtime}' has internal_url {url:?}: a UNIX socket is named by its \
                     absolute path, as in unix:///run/builder/exec.sock"
                )))
            }
            None => None,
        };
        if socket.is_none() && !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(ConfigError(format!(
                "BUILD_SIDECARS entry '{runtime}' has internal_url {url:?}: it must start with http:// (or https://, \
                 or unix:// for a UNIX socket)"
            )));
        }
        if url.starts_with("https://") && !cfg!(feature = "tls") {
            return Err(ConfigError(format!(
                "BUILD_SIDECARS entry '{runtime}' has internal_url {url:?}, but this sidecar-exec was built without \
                 TLS: use http:// (sidecars are reached over the pod's private network), or build the client with \
                 `cargo build -p sidecar-exec --features tls`"
            )));
        }
        let token = crate::sidecar::token::resolve(entry, runtime)?;
        Ok(Target { runtime: runtime.to_owned(), url: url.to_owned(), token, socket })
    }
}
