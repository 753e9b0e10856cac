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
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        for attempt in 0..100u32 {
            let name =
                format!("exec-server-{}-{:x}", std::process::id(), seed.wrapping_add(u128::from(attempt) * 7919));
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
