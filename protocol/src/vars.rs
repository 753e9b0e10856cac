//! The contract's environment variable names, written once: exec-server's flags, the clients and sidecarctl (which
//! sets them in the containers it starts and the files it emits) all use these constants, so a rename cannot leave
//! one side reading a variable the other no longer sets.

/// exec-server's listening port (the contract's `-port`).
pub const EXEC_SERVER_PORT: &str = "EXEC_SERVER_PORT";
/// exec-server's workspace root (the contract's `-cwd`).
pub const EXEC_SERVER_CWD: &str = "EXEC_SERVER_CWD";
/// The runtime exec-server reports in `/info`.
pub const EXEC_SERVER_RUNTIME: &str = "EXEC_SERVER_RUNTIME";
/// exec-server's bearer token itself (taken out of the environment at start).
pub const EXEC_SERVER_TOKEN: &str = "EXEC_SERVER_TOKEN";
/// A file holding exec-server's bearer token (a mounted secret).
pub const EXEC_SERVER_TOKEN_FILE: &str = "EXEC_SERVER_TOKEN_FILE";
/// The agent's map of runtimes to builders: `{"node":{"internal_url":"http://builder-node:8080"}}`.
pub const BUILD_SIDECARS: &str = "BUILD_SIDECARS";
/// A file holding the clients' bearer token.
pub const SIDECAR_TOKEN_FILE: &str = "SIDECAR_TOKEN_FILE";
/// The clients' bearer token itself.
pub const SIDECAR_TOKEN: &str = "SIDECAR_TOKEN";
/// The names of the agent's variables forwarded with each command (nothing else crosses).
pub const SIDECAR_ENV_PASSTHROUGH: &str = "SIDECAR_ENV_PASSTHROUGH";
