//! Reading a file that someone else put in the folder: a regular file only, never through a symlink, at most a
//! bounded size, and without ever blocking on what is opened. [`read_regular_file_through_links`] is the same read
//! for a file named by configuration rather than planted in a folder (a token file): links are followed there.
//!
//! The rules, and why:
//! - **Symlinks are refused, not followed** (`O_NOFOLLOW`, on the file's own name; the folders above it may be
//!   links). Whoever writes a request writes it into the folder; no protocol needs a link there. Following one would
//!   let that writer make the reader open any path the reader can: a FIFO (the open blocks), `/dev/zero` (endless),
//!   a terminal, or a secret such as a token file, whose first bytes an error message might quote back.
//! - **Only a regular file is opened.** Its type is looked up first (`lstat`), so a FIFO or a device is refused
//!   without being opened. The open is `O_NONBLOCK` (a FIFO swapped in after the look-up opens at once instead of
//!   waiting for a writer) and `O_NOCTTY`, and the type is checked again on the opened descriptor (`fstat`): that
//!   check is the one that counts, whatever the name pointed to a moment before.
//! - **At most `limit` bytes are read.** A larger file is refused by its size, unread (a 10 GiB sparse file costs
//!   nothing); one that grows while it is read is refused after `limit + 1` bytes.
//!
//! Every refusal is final for that file as it stands: callers answer it once with an error instead of trying again.
//!
//! A path from configuration (a flag or a variable naming a token file) is followed through links: a Kubernetes
//! Secret's files are links into its `..data/` folder, and whoever sets the flag chose the path. The other rules
//! hold there too: a FIFO, a device or a folder at the end of the links is refused without blocking, and at most
//! `limit` bytes are read, so `--token-file /dev/zero` or a 1 GB file fails at once instead of reading for ever.

use std::fmt;
use std::fs::{FileType, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::libc::{O_NOCTTY, O_NOFOLLOW, O_NONBLOCK};

/// What was read, with the metadata of the descriptor it was read from (so that its size, time and inode describe
/// these bytes, not whatever stands under the name by now).
#[derive(Debug)]
pub struct Contents {
    pub bytes: Vec<u8>,
    pub metadata: Metadata,
}

/// What a file is when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl FileKind {
    /// `None` for a regular file.
    fn of(file_type: FileType) -> Option<FileKind> {
        let kind = if file_type.is_file() {
            return None;
        } else if file_type.is_dir() {
            FileKind::Directory
        } else if file_type.is_symlink() {
            FileKind::Symlink
        } else if file_type.is_fifo() {
            FileKind::Fifo
        } else if file_type.is_socket() {
            FileKind::Socket
        } else if file_type.is_char_device() {
            FileKind::CharDevice
        } else if file_type.is_block_device() {
            FileKind::BlockDevice
        } else {
            FileKind::Unknown
        };
        Some(kind)
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Unknown => "a file of an unknown type",
        })
    }
}

/// Why a file is not read at all: final for the file as it stands. Displayed as what follows the file's name in a
/// message ("request file X {refusal}").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Anything but a regular file, including a symlink to one.
    NotRegular { kind: FileKind },
    /// More than `limit` bytes.
    TooLarge { limit: u64 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotRegular { kind: FileKind::Symlink } => {
                f.write_str("is a symbolic link: only regular files are read here, never through a link")
            }
            Refusal::NotRegular { kind } => write!(f, "is {kind}: only regular files are read here"),
            Refusal::TooLarge { limit } => write!(f, "is larger than {limit} bytes, the most that is read"),
        }
    }
}

/// Why a file was not read. Displayed as what follows the file's name in a message ("request file X {error}").
#[derive(Debug)]
pub enum ReadError {
    /// Not a file to read, by the rules above.
    Refused(Refusal),
    /// The file could not be looked up, opened or read: missing ([`ReadError::is_not_found`]), no permission, ….
    Io(io::Error),
}

impl ReadError {
    /// The file is not there (any more): nothing to answer.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(err) if err.kind() == io::ErrorKind::NotFound)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Refused(refusal) => refusal.fmt(f),
            ReadError::Io(err) => write!(f, "cannot be read: {err}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads the regular file `path`, of at most `limit` bytes, refusing a symlink. See the module's rules.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Contents, ReadError> {
    refuse_irregular(std::fs::symlink_metadata(path).map_err(ReadError::Io)?.file_type())?;
    read_opened(path, limit, O_NOFOLLOW)
}

/// Reads the regular file `path` or names, through any symlinks, of at most `limit` bytes: for a path that
/// configuration names (a token file), not one planted in a folder. See the module's rules.
pub fn read_regular_file_through_links(path: &Path, limit: u64) -> Result<Contents, ReadError> {
    refuse_irregular(std::fs::metadata(path).map_err(ReadError::Io)?.file_type())?;
    read_opened(path, limit, 0)
}

/// Opens `path` without blocking (and with `extra` flags), checks the opened descriptor's type and size, and reads
/// at most `limit` bytes.
fn read_opened(path: &Path, limit: u64, extra: i32) -> Result<Contents, ReadError> {
    let file = OpenOptions::new().read(true).custom_flags(O_NONBLOCK | O_NOCTTY | extra).open(path).map_err(|err| {
        match err.raw_os_error() {
            // What O_NOFOLLOW answers for a symlink that replaced the file after the look-up.
            Some(code) if code == Errno::ELOOP as i32 && extra & O_NOFOLLOW != 0 => {
                ReadError::Refused(Refusal::NotRegular { kind: FileKind::Symlink })
            }
            _ => ReadError::Io(err),
        }
    })?;
    let metadata = file.metadata().map_err(ReadError::Io)?;
    refuse_irregular(metadata.file_type())?;
    if metadata.len() > limit {
        return Err(ReadError::Refused(Refusal::TooLarge { limit }));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::Refused(Refusal::TooLarge { limit }));
    }
    Ok(Contents { bytes, metadata })
}

fn refuse_irregular(file_type: FileType) -> Result<(), ReadError> {
    match FileKind::of(file_type) {
        None => Ok(()),
        Some(kind) => Err(ReadError::Refused(Refusal::NotRegular { kind })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn kind(result: Result<Contents, ReadError>) -> FileKind {
        match result {
            Err(ReadError::Refused(Refusal::NotRegular { kind })) => kind,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_regular_file_is_read_whole_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("request.json");
        std::fs::write(&path, "12345").unwrap();
        let contents = read_regular_file(&path, 5).unwrap();
        assert_eq!((contents.bytes.as_slice(), contents.metadata.len()), (&b"12345"[..], 5));
        assert!(matches!(read_regular_file(&path, 4), Err(ReadError::Refused(Refusal::TooLarge { limit: 4 }))));
        assert!(read_regular_file(&dir.path().join("missing"), 5).unwrap_err().is_not_found());
    }

    #[test]
    fn fifos_devices_folders_and_links_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(kind(read_regular_file(&fifo, 10)), FileKind::Fifo);
        assert_eq!(kind(read_regular_file(Path::new("/dev/null"), 10)), FileKind::CharDevice);
        assert_eq!(kind(read_regular_file(dir.path(), 10)), FileKind::Directory);
        let regular = dir.path().join("regular");
        std::fs::write(&regular, "{}").unwrap();
        for (name, target) in [("to-fifo", fifo.as_path()), ("to-zero", Path::new("/dev/zero")), ("to-file", &regular)]
        {
            let link = dir.path().join(name);
            symlink(target, &link).unwrap();
            assert_eq!(kind(read_regular_file(&link, 10)), FileKind::Symlink, "{name}");
        }
        let dangling = dir.path().join("dangling");
        symlink("nowhere", &dangling).unwrap();
        assert_eq!(kind(read_regular_file(&dangling, 10)), FileKind::Symlink);
    }

    #[test]
    fn through_links_a_link_to_a_file_is_read_and_what_is_not_a_file_still_refused() {
        let dir = tempfile::tempdir().unwrap();
        // A Kubernetes Secret's layout: the name is a link into ..data/, itself a link to a timestamped folder.
        std::fs::create_dir(dir.path().join("..2026_12_04")).unwrap();
        std::fs::write(dir.path().join("..2026_12_04/token"), "tok\n").unwrap();
        symlink("..2026_12_04", dir.path().join("..data")).unwrap();
        symlink("..data/token", dir.path().join("token")).unwrap();
        let contents = read_regular_file_through_links(&dir.path().join("token"), 10).unwrap();
        assert_eq!(contents.bytes, b"tok\n");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let to_fifo = dir.path().join("to-fifo");
        symlink(&fifo, &to_fifo).unwrap();
        assert_eq!(kind(read_regular_file_through_links(&to_fifo, 10)), FileKind::Fifo);
        assert_eq!(kind(read_regular_file_through_links(Path::new("/dev/zero"), 10)), FileKind::CharDevice);
        assert_eq!(kind(read_regular_file_through_links(dir.path(), 10)), FileKind::Directory);
        let big = dir.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(1 << 30).unwrap();
        assert!(matches!(
            read_regular_file_through_links(&big, 65_536),
            Err(ReadError::Refused(Refusal::TooLarge { limit: 65_536 }))
        ));
        assert!(read_regular_file_through_links(&dir.path().join("missing"), 10).unwrap_err().is_not_found());
    }

    #[test]
    fn a_huge_sparse_file_is_refused_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        std::fs::File::create(&path).unwrap().set_len(10 << 30).unwrap();
        assert!(matches!(
            read_regular_file(&path, 1 << 20),
            Err(ReadError::Refused(Refusal::TooLarge { limit: 1_048_576 }))
        ));
        let message = read_regular_file(&path, 1 << 20).unwrap_err().to_string();
        assert_eq!(message, "is larger than 1048576 bytes, the most that is read");
    }
}
