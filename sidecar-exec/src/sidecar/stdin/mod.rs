//! sidecar-exec's stdin: which stdin is forwarded ([`policy`]), read whole into the one request of a call that does
//! not stream it ([`whole`]), or streamed while the command runs: [`source`] reads it, [`pump`] sends it
//! (`POST /runs/{id}/stdin`).

pub(crate) mod policy;
pub(crate) mod pump;
pub(crate) mod source;
pub(crate) mod whole;
