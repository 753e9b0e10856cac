//! sidecar-exec: runs a command in a build sidecar over the build-sidecar contract's HTTP API, as if it ran here.
//! [`program`] is the program; it names its runs and resumes them across lost connections ([`resume`]).

pub mod body;
pub mod config_error;
pub mod forward;
pub mod http;
pub mod json_string;
pub mod output;
pub mod program;
pub mod reply_reader;
pub mod reported_code;
pub mod request;
pub mod resume;
pub mod run_id;
pub mod runs;
pub mod settings;
pub mod sidecars;
pub mod sse;
pub mod status;
pub mod stream;
pub mod token;
