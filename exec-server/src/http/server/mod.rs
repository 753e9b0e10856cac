//! The server layer: the sockets HTTP is served on, the accept loop and its connection cap, each connection served
//! by hyper with its header and idle timeouts, and the few replies written outside any route (503 at the cap, 408,
//! hyper's own refusals with a JSON body). It serves whatever router it is given: nothing here knows a route.

mod activity;
mod connection;
mod connection_io;
pub mod fds;
mod listener;
mod refusal;
pub mod socket;

pub use activity::Timeouts;
pub use connection::BodyTimeout;
pub use listener::{serve, Limits};
