//! The private folder where named runs spill their output: mode 0700, made at start, removed at exit (a folder the
//! operator named is kept, and only our files in it are removed, each when its run is forgotten).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    /// We made it, so we remove it (with anything left in it) at exit.
    ours: bool,
}

impl StateDir {
    /// `given` (made 0700 if it is not there), or a fresh `exec-server-PID-RANDOM` in the system temp dir.
    pub fn create(given: Option<&Path>) -> std::io::Result<Self> {
        if let Some(path) = given {
            let made = match std::fs::DirBuilder::new().recursive(false).mode(0o700).create(path) {
                Ok(()) => true,
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => false,
                Err(err) => {
                    return Err(std::io::Error::new(
                        err.kind(),
                        format!("cannot create --state-dir {}: {err}", path.display()),
                    ))
                }
            };
            return Ok(StateDir { path: path.to_path_buf(), ours: made });
        }
        let base = std::env::temp_dir();
        for attempt in 0..100u32 {
            // Unguessable (a fresh SipHash key each time, seeded from the OS's random source), so another local
            // user cannot take the names first and keep the server from starting; the folder is created exclusively
            // at mode 0700 either way.
            let random = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), attempt);
            let name = format!("exec-server-{}-{random:016x}", std::process::id());
            let path = base.join(name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(StateDir { path, ours: true }),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => {
                    return Err(std::io::Error::new(
                        err.kind(),
                        format!("cannot create a state folder in {}: {err}; set --state-dir", base.display()),
                    ))
                }
            }
        }
        Err(std::io::Error::other("cannot find a free state folder name in the temp dir; set --state-dir"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if self.ours {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
