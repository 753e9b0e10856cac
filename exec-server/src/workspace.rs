//! Working-directory resolution and confinement to the workspace root.
//!
//! What confinement protects: a request cannot *start* a command outside the root — not with `..`, an absolute
//! path, a symlink, nor by swapping a checked directory for a symlink before the command starts (the command enters
//! the very directory that was opened and checked, see [`WorkDir`]). What it does not: a command can `cd` anywhere
//! its user may, and read or write whatever its user can. It keeps honest requests where they belong; it is not a
//! sandbox, which needs another user, a container or a namespace.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A command's working directory. One that passed the confinement check is held open, and the command enters
/// *that* directory — `/proc/<server pid>/fd/<n>`, which the kernel resolves to the opened directory itself, not
/// to whatever its path names by the time the command starts. The server's pid rather than `self`: the spawn sets
/// up the child's descriptors 0–2 before it changes directory, so a low descriptor number in the child's own table
/// could already name something else. A plain path (the file protocol, which does not confine) is entered by path.
#[derive(Debug, Clone)]
pub struct WorkDir {
    path: PathBuf,
    opened: Option<Arc<File>>,
}

impl WorkDir {
    /// The directory as resolved (for messages and logs).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path a new command should change into, in this process or in a child forked from it (which has the
    /// descriptor until its `execve`); valid while this value lives. `/proc/self`, not `/proc/<server's pid>`:
    /// the server is not dumpable (see `privacy`), so its own `/proc` folder is closed to its children.
    pub fn enter(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        match &self.opened {
            Some(dir) => PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())),
            None => self.path.clone(),
        }
    }
}

impl From<PathBuf> for WorkDir {
    /// A directory entered by path, unchecked.
    fn from(path: PathBuf) -> Self {
        WorkDir { path, opened: None }
    }
}

impl PartialEq<&Path> for WorkDir {
    fn eq(&self, other: &&Path) -> bool {
        self.path == *other
    }
}

/// Why a requested working directory cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum CwdError {
    /// After resolving `..` and symlinks the directory lies outside the root (a client error: 400).
    Escapes { requested: String, resolved: PathBuf, root: PathBuf },
    /// The path holds a NUL byte (a client error: 400).
    Invalid(String),
    /// The directory does not exist or is not a directory (the contract's start failure: exit -1).
    Missing { path: PathBuf, problem: DirProblem },
    /// The server is out of file descriptors (EMFILE, or ENFILE for the whole system): nothing about the
    /// directory is known, and no command could start now (the server's fault, not the request's: 503).
    OutOfDescriptors(nix::errno::Errno),
}

/// What is wrong with a working directory a command cannot start in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirProblem {
    DoesNotExist,
    NotADirectory,
    /// It is there, but opening it failed (other than by not being there).
    CannotOpen,
    /// It was opened, but where it lies could not be read back (`/proc` unavailable).
    CannotCheck,
}

impl DirProblem {
    /// The one check of a directory by its path: `None` when it is a directory (after symlinks).
    pub fn of(path: &Path) -> Option<DirProblem> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => None,
            Ok(_) => Some(DirProblem::NotADirectory),
            Err(_) => Some(DirProblem::DoesNotExist),
        }
    }
}

impl std::fmt::Display for DirProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DirProblem::DoesNotExist => "does not exist",
            DirProblem::NotADirectory => "is not a directory",
            DirProblem::CannotOpen => "cannot be opened",
            DirProblem::CannotCheck => "cannot be checked",
        })
    }
}

impl std::fmt::Display for CwdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CwdError::Escapes { requested, resolved, root } => write!(
                f,
                "cwd {requested:?} resolves to {} which is outside the workspace root {}; use a path inside the \
                 root (relative paths resolve against it), or start the server with --allow-any-cwd",
                resolved.display(),
                root.display()
            ),
            CwdError::Invalid(requested) => write!(f, "cwd {requested:?} contains a NUL byte"),
            CwdError::Missing { path, problem } => write!(f, "working directory {} {problem}", path.display()),
            CwdError::OutOfDescriptors(err) => write!(
                f,
                "the server is out of file descriptors ({}): nothing can start now; retry once fewer commands \
                 run, or raise the server's open-file limit (ulimit -n)",
                err.desc()
            ),
        }
    }
}

/// Resolves a requested working directory: absent or empty means `root`; relative paths join `root`; the result
/// is canonical (no `..`, no symlinks), opened, and — checked on the opened directory, so that nothing can be
/// swapped in between — unless `allow_any`, inside `root`. `root` must be canonical.
pub fn resolve_cwd(root: &Path, requested: Option<&str>, allow_any: bool) -> Result<WorkDir, CwdError> {
    let requested = requested.unwrap_or("");
    if requested.contains('\0') {
        return Err(CwdError::Invalid(requested.to_owned()));
    }
    let joined = if requested.is_empty() { root.to_path_buf() } else { root.join(requested) };
    let escapes =
        |resolved: PathBuf| CwdError::Escapes { requested: requested.to_owned(), resolved, root: root.into() };
    let resolved = match joined.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => {
            // Tell an escape from a plain missing directory by the lexical path, so a probe for a path outside
            // the root learns nothing about what exists there.
            let lexical = normalize_lexically(&joined);
            if !allow_any && !lexical.starts_with(root) {
                return Err(escapes(lexical));
            }
            return Err(CwdError::Missing { path: joined, problem: DirProblem::DoesNotExist });
        }
    };
    if !allow_any && !resolved.starts_with(root) {
        return Err(escapes(resolved));
    }
    let dir = match open_directory(&resolved) {
        Ok(dir) => dir,
        Err(err) => {
            let problem = match err.raw_os_error() {
                Some(code @ (nix::libc::EMFILE | nix::libc::ENFILE)) => {
                    return Err(CwdError::OutOfDescriptors(nix::errno::Errno::from_raw(code)))
                }
                Some(nix::libc::ENOTDIR) => DirProblem::NotADirectory,
                Some(nix::libc::ENOENT) => DirProblem::DoesNotExist,
                _ => DirProblem::CannotOpen,
            };
            return Err(CwdError::Missing { path: resolved, problem });
        }
    };
    // What was opened, named by the kernel: if the path was swapped for a symlink since it was resolved, this is
    // where the symlink led.
    let opened = opened_path(&dir)
        .map_err(|_| CwdError::Missing { path: resolved.clone(), problem: DirProblem::CannotCheck })?;
    if !allow_any && !opened.starts_with(root) {
        return Err(escapes(opened));
    }
    Ok(WorkDir { path: opened, opened: Some(Arc::new(dir)) })
}

/// `O_PATH`: a handle to the directory itself, which needs no permission to read it (entering it needs only
/// search permission, checked when the command changes into it, as before).
fn open_directory(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY).open(path)
}

/// The path of an open directory, from `/proc/self/fd`: canonical, and current (a directory that was removed reads
/// as `… (deleted)`, which fails the caller's checks).
fn opened_path(dir: &File) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    let path = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    if path.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    Ok(path)
}

/// `a/b/../c` → `a/c` without touching the file system.
fn normalize_lexically(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        (dir, root)
    }

    #[test]
    fn relative_and_absolute_inside_are_fine() {
        let (_dir, root) = root();
        assert_eq!(resolve_cwd(&root, None, false).unwrap(), root.as_path());
        assert_eq!(resolve_cwd(&root, Some("sub/deeper/.."), false).unwrap(), root.join("sub").as_path());
        let abs = root.join("sub/deeper");
        assert_eq!(resolve_cwd(&root, abs.to_str(), false).unwrap(), abs.as_path());
    }

    #[test]
    fn escapes_by_dotdot_absolute_path_or_symlink_are_refused() {
        let (_dir, root) = root();
        for escape in ["..", "sub/../../", "/", "out", "out/..", "../does-not-exist"] {
            let err = resolve_cwd(&root, Some(escape), false).unwrap_err();
            assert!(matches!(err, CwdError::Escapes { .. }), "{escape}: {err:?}");
            assert!(err.to_string().contains(&root.display().to_string()));
        }
        assert!(resolve_cwd(&root, Some("out"), true).is_ok());
    }

    #[test]
    fn missing_and_non_directories_are_start_failures() {
        let (_dir, root) = root();
        assert!(matches!(
            resolve_cwd(&root, Some("nope"), false),
            Err(CwdError::Missing { problem: DirProblem::DoesNotExist, .. })
        ));
        assert!(matches!(
            resolve_cwd(&root, Some("file"), false),
            Err(CwdError::Missing { problem: DirProblem::NotADirectory, .. })
        ));
        assert!(matches!(resolve_cwd(&root, Some("a\0b"), false), Err(CwdError::Invalid(_))));
    }

    #[test]
    fn the_opened_directory_is_what_gets_entered() {
        let (_dir, root) = root();
        let work = resolve_cwd(&root, Some("sub"), false).unwrap();
        // Swap the checked directory for a symlink to outside: entering still lands in the directory that was checked.
        std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("sub")).unwrap();
        assert_eq!(std::fs::canonicalize(work.enter()).unwrap(), root.join("moved"));
        assert!(std::fs::metadata(work.enter().join("deeper")).unwrap().is_dir());
    }
}
