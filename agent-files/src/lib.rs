//! Files in folders an agent controls: the file-IPC folders that exec-server and sidecar-ipc share with an agent
//! (or an orchestrator) that may be careless or hostile. Anything may stand under a name there: a FIFO, a symlink to
//! `/dev/zero`, a 10 GiB sparse file, a symlink planted where a temporary file will be created. Both crates read and
//! write those folders through this one crate, so the rules exist once:
//!
//! - [`read_request`] reads regular files only, never through a symlink, never more than a bound, and never blocks
//!   on what it opens.
//! - [`write_atomic`] writes through a temporary created exclusively (never through anything planted) under a short
//!   name, then renames it into place; [`write_atomic_mode`] also gives the file an exact mode (an executable
//!   wrapper, a private key copy).
//! - [`watch::FolderWatch`] reports changes in those folders to async code (inotify on the runtime's reactor).

mod read;
pub mod watch;
mod write;

pub use read::{read_request, Contents, FileKind, ReadError};
pub use write::{write_atomic, write_atomic_mode};
