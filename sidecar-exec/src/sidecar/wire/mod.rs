//! What goes over HTTP and how it is read: the client and its one-line messages (`http`), the waits between retries
//! (`backoff`), the request body (`request`), a reply's head ([`reply_head`]) and bounded body (`body`), a
//! blocking reply read in place ([`reply_reader`] with [`json_string`]), and an event stream's lines ([`sse`]).
//! The decoders are public for the fuzz properties and the A/B examples.

pub(crate) mod backoff;
pub(crate) mod body;
pub(crate) mod http;
pub mod json_string;
pub mod reply_head;
pub mod reply_reader;
pub(crate) mod request;
pub mod sse;
