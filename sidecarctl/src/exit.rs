//! The exit code of sidecarctl's own failures, shared by every command (`up`, `compose`, `kube`, the binary).

/// Exit code when sidecarctl itself fails (as `docker run`: 125); an agent's own code passes through unchanged.
pub const EXIT_FAILED: i32 = 125;
