//! sidecar-exec's modes besides forwarding a command: [`runs`] (`--runs`, `--attach`, cancelling), [`status`], and
//! [`explain`] (`--explain` and SIDECAR_VERBOSE=1: what a call sends, before it is sent).

pub(crate) mod explain;
pub(crate) mod runs;
pub(crate) mod status;
