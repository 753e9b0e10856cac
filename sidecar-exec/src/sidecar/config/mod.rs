//! sidecar-exec's configuration, read once before anything is sent: the sidecars of BUILD_SIDECARS ([`sidecars`],
//! each `entry` with its `token`), the per-call SIDECAR_* `settings` with the working directory of `cwd`, and
//! the `patience` with a silent sidecar.

pub(crate) mod cwd;
pub(crate) mod entry;
pub(crate) mod patience;
pub(crate) mod settings;
pub mod sidecars;
pub(crate) mod token;
