//! Files in folders an agent controls: the file-IPC folders that exec-server and sidecar-ipc share with an agent
//! (or an orchestrator) that may be careless or hostile. Anything may stand under a name there: a FIFO, a symlink to
//! `/dev/zero`, a 10 GiB sparse file, a symlink planted where a temporary file will be created, a file its writer
//! has not finished. Both programs read, wait on and write those folders through this one crate, so the rules exist
//! once, and what differs between them is a parameter ([`FolderRules`]) each sets with its reasons:
//!
//! - [`read_regular_file`] reads regular files only, never through a symlink, never more than a bound, and never
//!   blocks on what it opens.
//! - [`read_document`] reads a JSON document by those rules and says whether it is ready, unusable for good, or
//!   incomplete (perhaps still being written); [`UnfinishedWrites`] judges an incomplete file broken once it has not
//!   changed for [`QUIET_PERIOD`] ([`FileVersion`] tells a change).
//! - [`FolderChanges`] wakes async code when the folders change (inotify on the runtime's reactor, [`watch`]), with a
//!   periodic re-check, and the re-check alone where inotify cannot be had.
//! - [`write_atomic`] writes through a temporary created exclusively (never through anything planted) under a short
//!   name, then renames it into place; [`write_atomic_mode`] also gives the file an exact mode (an executable
//!   wrapper, a private key copy).

mod changes;
mod document;
mod read;
mod rules;
mod unfinished;
mod version;
pub mod watch;
mod write;

pub use changes::{Change, FolderChanges, Wake};
pub use document::{excerpt, read_document, DocumentError, Incomplete, Reading, Unusable};
pub use read::{read_regular_file, read_regular_file_through_links, Contents, FileKind, ReadError, Refusal};
pub use rules::{FolderRules, Recheck};
pub use unfinished::{UnfinishedWrite, UnfinishedWrites, Verdict, QUIET_PERIOD};
pub use version::FileVersion;
pub use write::{symlink_atomic, write_atomic, write_atomic_mode};
