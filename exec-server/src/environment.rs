//! What every command's environment starts from, whichever transport runs it: the server's own environment, minus
//! its own settings.

use std::ffi::OsString;

/// The prefix of the server's own settings (`EXEC_SERVER_PORT`, the token above all): never passed on.
const OWN_PREFIX: &str = "EXEC_SERVER_";

/// The server's environment without its `EXEC_SERVER_*` variables; each transport lays a request's own over it.
pub fn inherited() -> Vec<(OsString, OsString)> {
    std::env::vars_os().filter(|(name, _)| !name.to_string_lossy().starts_with(OWN_PREFIX)).collect()
}
