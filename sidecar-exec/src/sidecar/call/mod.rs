//! One forwarded call: [`forward`] sends it negotiated, streaming or blocking, or on a remote terminal; [`stream`]
//! reads an event stream into [`output`]; [`resume`] follows a named run ([`run_id`] names it) across lost
//! connections; [`signals`] delivers signals as sent; [`reported_code`] gives the exit code.

pub(crate) mod forward;
pub(crate) mod output;
pub(crate) mod reported_code;
pub(crate) mod resume;
pub(crate) mod run_id;
pub(crate) mod signals;
pub(crate) mod stream;
