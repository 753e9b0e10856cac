//! Atomic writes into a folder that others write too: a reader sees the old file or the whole new one, never a
//! part of it, and nothing planted in the folder can redirect the write.
//!
//! The rules, and why:
//! - **The temporary is created exclusively** (`O_CREAT|O_EXCL|O_NOFOLLOW`): whatever already stands under its name
//!   (a stale temporary, or a symlink planted to make the writer overwrite the file it points to) makes the creation
//!   fail, and the next name is tried, up to [`ATTEMPTS`] names. Nothing is ever written through an existing name.
//! - **Its name is short and says nothing of the target**: `.tmp-{pid}-{n}-{random}`, about 40 bytes. A name
//!   derived from the target's (`.{name}.tmp`) is longer than the target's, so a target name near the 255-byte limit
//!   had no temporary name at all; and a predictable name can be planted in advance. The leading dot keeps it out of
//!   every reader's prefix match (`exec-request-`, `request-`, `clear-`: the agent-runner takes files by prefix
//!   alone and does not skip `.tmp`). The random part is new for each name, so names cannot be guessed ahead.
//! - **It sits in the target's folder**, so the rename stays on one filesystem and is atomic.
//! - **A mode, when asked for, is set before the rename** ([`write_atomic_mode`]): the temporary is created with
//!   that mode (the umask can only narrow it, so a private file is never readable by others, not even for a
//!   moment), then set to exactly that mode, so the file appears under its name complete and with its final mode
//!   (an executable wrapper never exists without its `x` bits).
//! - **No fsync.** These files are messages between processes on one machine (the containers of one pod sharing a
//!   volume): a reader sees the renamed file whole through the shared page cache whether or not it has reached the
//!   disk. Only a crash of the machine can lose or empty a file that was not synced, and the run those messages
//!   belong to does not survive that crash; if its folder does, a file emptied by it reads as not yet written and
//!   then as broken (every reader here treats an empty file so), never as a wrong answer. An fsync per file would
//!   buy nothing else and cost a disk flush on every result (several times the write itself on the development
//!   VM's disk, more on a busy node). This is the one rule for both crates: sidecar-ipc used to sync
//!   and exec-server did not.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::BuildHasher;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::libc::O_NOFOLLOW;

/// How many temporary names are tried before giving up. Names are unpredictable, so only a stale file from an
/// earlier process could be in the way, and the first or second name is free.
pub const ATTEMPTS: usize = 64;

/// Writes `bytes` to `path` atomically: into a new temporary file beside it, then renamed over it. On failure
/// nothing is left behind and `path` is unchanged.
/// The file gets the default mode (0666 less the umask).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with_names(path, bytes, None, std::iter::repeat_with(temporary_name).take(ATTEMPTS))
}

/// As [`write_atomic`], and the file has exactly the permission bits `mode` (e.g. 0o755, 0o600), whatever the
/// umask, from the moment it appears under its name.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_with_names(path, bytes, Some(mode), std::iter::repeat_with(temporary_name).take(ATTEMPTS))
}

/// A symlink at `path` pointing to `target`, put in place atomically by the same rules: made under a fresh
/// temporary name beside it (`symlink(2)` never follows or replaces what stands under a name, so a planted name only
/// makes it try the next), then renamed over `path` (`rename(2)` replaces the name itself, never what a symlink
/// there points to). The wrapper installer's links are made so.
pub fn symlink_atomic(target: &Path, path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for name in std::iter::repeat_with(temporary_name).take(ATTEMPTS) {
        let temporary = dir.join(name);
        match std::os::unix::fs::symlink(target, &temporary) {
            Ok(()) => {
                let renamed = std::fs::rename(&temporary, path);
                if renamed.is_err() {
                    let _ = std::fs::remove_file(&temporary);
                }
                return renamed;
            }
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free temporary name in {} after {ATTEMPTS} tries", dir.display()),
    ))
}

fn write_with_names(
    path: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    names: impl IntoIterator<Item = String>,
) -> io::Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (mut file, temporary) = create_exclusive(dir, mode, names)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| mode.map_or(Ok(()), |mode| file.set_permissions(std::fs::Permissions::from_mode(mode))))
        .and_then(|()| {
            drop(file);
            std::fs::rename(&temporary, path)
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A new file under the first of `names` that nothing stands under yet.
/// `mode` (if any) is the creation mode, which the umask narrows.
fn create_exclusive(
    dir: &Path,
    mode: Option<u32>,
    names: impl IntoIterator<Item = String>,
) -> io::Result<(File, PathBuf)> {
    for name in names {
        let candidate = dir.join(name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).custom_flags(O_NOFOLLOW);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let created = options.open(&candidate);
        match created {
            Ok(file) => return Ok((file, candidate)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free temporary file name in {} after {ATTEMPTS} tries", dir.display()),
    ))
}

/// `.tmp-{pid}-{n}-{random}`: unique in this process by `n`, unguessable by the random part (a fresh SipHash key
/// for each name).
fn temporary_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let random = RandomState::new().hash_one(n);
    format!(".tmp-{}-{n}-{random:016x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn writes_replace_the_file_whole_and_leave_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["result.json"]);
    }

    #[test]
    fn temporary_names_are_short_hidden_and_new_each_time() {
        let (one, two) = (temporary_name(), temporary_name());
        assert_ne!(one, two);
        assert!(one.starts_with(".tmp-") && one.len() <= 60, "{one}");
    }

    #[test]
    fn a_target_name_of_255_bytes_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r".repeat(255));
        write_atomic(&path, b"x").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    }

    #[test]
    fn a_planted_symlink_or_file_is_skipped_and_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        std::fs::write(&canary, "canary").unwrap();
        std::os::unix::fs::symlink(&canary, dir.path().join(".planted-link")).unwrap();
        std::os::unix::fs::symlink("dangling", dir.path().join(".planted-dangling")).unwrap();
        std::fs::write(dir.path().join(".planted-file"), "stale").unwrap();
        let path = dir.path().join("result.json");
        let candidates = [".planted-link", ".planted-dangling", ".planted-file", ".free"].map(String::from);
        write_with_names(&path, b"result", None, candidates).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "result");
        assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary");
        assert!(!dir.path().join("dangling").exists(), "created through a dangling link");
        assert_eq!(std::fs::read_to_string(dir.path().join(".planted-file")).unwrap(), "stale");

        // No free name: an error, and nothing written anywhere.
        let err =
            write_with_names(&dir.path().join("other.json"), b"x", None, [".planted-link".to_owned()]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("other.json").exists());
        assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary");
    }

    #[test]
    fn a_symlink_at_the_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        std::fs::write(&canary, "canary").unwrap();
        let path = dir.path().join("result.json");
        std::os::unix::fs::symlink(&canary, &path).unwrap();
        write_atomic(&path, b"result").unwrap();
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary");
    }

    #[test]
    fn a_mode_is_exact_whatever_the_umask_and_replaces_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wrapper");
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        // 0o775 and 0o606 have bits every usual umask (022, 002, 077) clears: they come through all the same.
        write_atomic_mode(&path, b"#!/bin/sh\n", 0o775).unwrap();
        assert_eq!(mode(&path), 0o775);
        write_atomic_mode(&path, b"key", 0o606).unwrap();
        assert_eq!(mode(&path), 0o606);
        write_atomic_mode(&path, b"key", 0o600).unwrap();
        assert_eq!((mode(&path), std::fs::read(&path).unwrap()), (0o600, b"key".to_vec()));
        assert_eq!(names(dir.path()), ["wrapper"]);
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("result.json")).unwrap();
        std::fs::write(dir.path().join("result.json/inside"), "").unwrap();
        assert!(write_atomic(&dir.path().join("result.json"), b"x").is_err());
        assert_eq!(names(dir.path()), ["result.json"]);
    }
}
