//! One entry of BUILD_SIDECARS as written: the contract's `internal_url` and our token fields, checked when its
//! runtime is asked for ([`crate::sidecar::config::sidecars::Sidecars::target`]).

use std::path::PathBuf;

use serde::Deserialize;

/// One entry of BUILD_SIDECARS. Only `internal_url` is in the contract; the token fields are ours (read by
/// [`crate::sidecar::config::token::resolve`]).
#[derive(Debug, Clone, Deserialize)]
pub struct SidecarEntry {
    pub internal_url: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
}
