//! The private key file ssh is given. A key mounted from a secret often has the wrong owner or mode (root-owned,
//! 0644): ssh refuses a key others can read, and one owned by someone else is not ours to trust as is. Such a key
//! is used through a private copy (0600, in ssh-exec's own 0700 folder), made once per key content.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use std::fmt;

/// The file to pass to `ssh -i`: `key` itself when it is ours and private, else a private copy in `private_dir`.
pub fn usable(key: &Path, private_dir: Option<&Path>) -> Result<PathBuf, KeyCopyError> {
    let unreadable = |err| KeyCopyError::Unreadable { key: key.to_owned(), err };
    let meta = std::fs::metadata(key).map_err(unreadable)?;
    if meta.uid() == nix::unistd::getuid().as_raw() && meta.mode() & 0o077 == 0 {
        return Ok(key.to_owned());
    }
    let content = std::fs::read(key).map_err(unreadable)?;
    let Some(dir) = private_dir else {
        return Err(KeyCopyError::NoPrivateFolder { key: key.to_owned(), mode: meta.mode() & 0o777 });
    };
    let copy = dir.join(format!("key-{:016x}", digest(&content)));
    if std::fs::read(&copy).is_ok_and(|existing| existing == content) {
        return Ok(copy);
    }
    // Atomically, through an exclusive temporary created 0600: a concurrent call sees no copy or the whole one.
    agent_files::write_atomic_mode(&copy, &content, 0o600).map_err(|err| KeyCopyError::CopyFailed {
        key: key.to_owned(),
        dir: dir.to_owned(),
        err,
    })?;
    Ok(copy)
}

/// Why the key cannot be given to ssh.
#[derive(Debug)]
pub enum KeyCopyError {
    Unreadable {
        key: PathBuf,
        err: std::io::Error,
    },
    /// It needs a private copy (mode `mode`, or another owner), and there is no private folder to make it in.
    NoPrivateFolder {
        key: PathBuf,
        mode: u32,
    },
    CopyFailed {
        key: PathBuf,
        dir: PathBuf,
        err: std::io::Error,
    },
}

impl fmt::Display for KeyCopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyCopyError::Unreadable { key, err } => write!(f, "cannot read the private key {}: {err}", key.display()),
            KeyCopyError::NoPrivateFolder { key, mode } => write!(
                f,
                "the private key {} has mode {mode:o} or another owner, and there is no private folder for a copy \
                 ssh would accept: make it owned by uid {} with mode 600",
                key.display(),
                nix::unistd::getuid()
            ),
            KeyCopyError::CopyFailed { key, dir, err } => {
                write!(f, "cannot make a private copy of the key {} in {}: {err}", key.display(), dir.display())
            }
        }
    }
}

impl std::error::Error for KeyCopyError {}

/// A stable digest of the key's bytes, to name its copy (not a security function: the copy is compared in full).
fn digest(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
    }
}
