//! The private key file ssh is given. A key mounted from a secret often has the wrong owner or mode (root-owned,
//! 0644): ssh refuses a key others can read, and one owned by someone else is not ours to trust as is. Such a key
//! is used through a private copy (0600, in ssh-exec's own 0700 folder), one per key path, beside a note of the path
//! it copies; copies whose key changed, went or no longer needs one are removed ([`remove_stale_copies`]).

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// A copy's name starts so; its note of the key's path is `<copy>.source`.
const PREFIX: &str = "key-";
const SOURCE: &str = "source";

/// The file to pass to `ssh -i`: `key` itself when it is ours and private, else a private copy in `private_dir`.
pub fn usable(key: &Path, private_dir: Option<&Path>) -> Result<PathBuf, KeyCopyError> {
    let unreadable = |err| KeyCopyError::Unreadable { key: key.to_owned(), err };
    let meta = std::fs::metadata(key).map_err(unreadable)?;
    if usable_as_is(&meta) {
        return Ok(key.to_owned());
    }
    let content = std::fs::read(key).map_err(unreadable)?;
    let Some(dir) = private_dir else {
        return Err(KeyCopyError::NoPrivateFolder { key: key.to_owned(), mode: meta.mode() & 0o777 });
    };
    let copy = dir.join(format!("{PREFIX}{:016x}", digest(key.as_os_str().as_bytes())));
    if std::fs::read(&copy).is_ok_and(|existing| existing == content) {
        return Ok(copy);
    }
    let failed = |err| KeyCopyError::CopyFailed { key: key.to_owned(), dir: dir.to_owned(), err };
    let _lock = lock(dir).map_err(failed)?;
    // Atomically, through an exclusive temporary created 0600: a concurrent call sees no copy or the whole one. The
    // note first, so that no copy is ever without the path that tells whether it is stale.
    agent_files::write_atomic_mode(&copy.with_extension(SOURCE), key.as_os_str().as_bytes(), 0o600).map_err(failed)?;
    agent_files::write_atomic_mode(&copy, &content, 0o600).map_err(failed)?;
    Ok(copy)
}

/// Whether ssh takes the key as it is: ours, and nobody else may read it.
fn usable_as_is(meta: &std::fs::Metadata) -> bool {
    meta.uid() == nix::unistd::getuid().as_raw() && meta.mode() & 0o077 == 0
}

/// Removes the copies in `private_dir` that no longer copy their key: the key is gone or unreadable, its content
/// changed (rotated: the next call that uses it copies it again), or it is now usable as it is; and copies without
/// a note (from before the notes). Every call does it, so a rotated or deleted key does not live on in the folder
/// (which is on disk when XDG_RUNTIME_DIR is unset). Under the folder's key lock, which writing a copy takes too, so a
/// copy just written is never taken for a stale one. Best effort: what cannot be read or removed stays.
pub fn remove_stale_copies(private_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(private_dir) else { return };
    let copies: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX) && !n.contains('.'))
        })
        .collect();
    if copies.is_empty() {
        return;
    }
    let Ok(_lock) = lock(private_dir) else { return };
    for copy in copies {
        let note = copy.with_extension(SOURCE);
        let key = std::fs::read(&note).ok().map(|path| PathBuf::from(OsString::from_vec(path)));
        let current = key.as_deref().and_then(|key| {
            let meta = std::fs::metadata(key).ok()?;
            (!usable_as_is(&meta)).then(|| std::fs::read(key).ok()).flatten()
        });
        if current.is_none() || std::fs::read(&copy).ok() != current {
            let _ = std::fs::remove_file(&copy);
            let _ = std::fs::remove_file(&note);
        }
    }
}

/// The private folder's lock for key copies (an exclusive flock, released when dropped or when the holder dies).
fn lock(private_dir: &Path) -> std::io::Result<Flock<File>> {
    let file = File::options().create(true).append(true).open(private_dir.join("keys.lock"))?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| std::io::Error::from(errno))
}

/// Why the key cannot be given to ssh.
#[derive(Debug, thiserror::Error)]
pub enum KeyCopyError {
    #[error("cannot read the private key {}: {err}", .key.display())]
    Unreadable { key: PathBuf, err: std::io::Error },
    /// It needs a private copy (mode `mode`, or another owner), and there is no private folder to make it in.
    #[error(
        "the private key {} has mode {mode:o} or another owner, and there is no private folder for a copy ssh would \
         accept: make it owned by uid {} with mode 600",
        .key.display(),
        nix::unistd::getuid()
    )]
    NoPrivateFolder { key: PathBuf, mode: u32 },
    #[error("cannot make a private copy of the key {} in {}: {err}", .key.display(), .dir.display())]
    CopyFailed { key: PathBuf, dir: PathBuf, err: std::io::Error },
}

/// A stable digest of the key's path, to name its copy (not a security function: the copy is compared in full).
fn digest(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// The key file, checked: a configured key must exist; any key must not be empty (ssh would fail with a puzzling
/// "invalid format" instead). The default key may be missing ([`KeyFileError::Unreadable`], then ignored).
pub fn checked_key(path: PathBuf) -> Result<PathBuf, KeyFileError> {
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => Err(KeyFileError::Empty(path)),
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(KeyFileError::NotAFile(path)),
        Err(err) => Err(KeyFileError::Unreadable(path, err)),
    }
}

/// Why the key SSH_KEY_PATH names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("the private key {} is empty: mount the key itself there, or point SSH_KEY_PATH at it", .0.display())]
    Empty(PathBuf),
    #[error("SSH_KEY_PATH {} is not a file", .0.display())]
    NotAFile(PathBuf),
    #[error("cannot read the private key SSH_KEY_PATH={}: {err}", .0.display(), err = .1)]
    Unreadable(PathBuf, std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_is_a_file_that_is_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id");
        std::fs::write(&key, "").unwrap();
        assert!(matches!(checked_key(key.clone()), Err(KeyFileError::Empty(_))));
        std::fs::write(&key, "KEY").unwrap();
        assert_eq!(checked_key(key.clone()).unwrap(), key);
        assert!(matches!(checked_key(dir.path().to_owned()), Err(KeyFileError::NotAFile(_))));
        assert!(matches!(checked_key(dir.path().join("none")), Err(KeyFileError::Unreadable(..))));
    }

    #[test]
    fn a_readable_key_is_used_through_a_private_copy() {
        let dir = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        let key = dir.path().join("id");
        std::fs::write(&key, "KEY\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(usable(&key, Some(private.path())).unwrap(), key);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let copy = usable(&key, Some(private.path())).unwrap();
        assert_ne!(copy, key);
        assert_eq!(std::fs::read(&copy).unwrap(), b"KEY\n");
        assert_eq!(std::fs::metadata(&copy).unwrap().mode() & 0o777, 0o600);
        assert_eq!(usable(&key, Some(private.path())).unwrap(), copy, "the copy is reused");
        assert!(matches!(usable(&key, None), Err(KeyCopyError::NoPrivateFolder { mode: 0o644, .. })));
        remove_stale_copies(private.path());
        assert_eq!(std::fs::read(&copy).unwrap(), b"KEY\n", "a copy of the key as it is stays");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        remove_stale_copies(private.path());
        assert!(!copy.exists(), "a key ssh takes as it is needs no copy");
        assert!(!copy.with_extension(SOURCE).exists());
    }
}
