//! Working-directory resolution and confinement to the workspace root.

use std::path::{Path, PathBuf};

/// Why a requested working directory cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum CwdError {
    /// After resolving `..` and symlinks the directory lies outside the root (a client error: 400).
    Escapes { requested: String, resolved: PathBuf, root: PathBuf },
    /// The path holds a NUL byte (a client error: 400).
    Invalid(String),
    /// The directory does not exist or is not a directory (the contract's start failure: exit -1).
    Missing { path: PathBuf, why: &'static str },
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
            CwdError::Missing { path, why } => write!(f, "working directory {} {why}", path.display()),
        }
    }
}

/// Resolves a requested working directory: absent or empty means `root`; relative paths join `root`; the result
/// is canonical (no `..`, no symlinks) and, unless `allow_any`, inside `root`. `root` must be canonical.
pub fn resolve_cwd(root: &Path, requested: Option<&str>, allow_any: bool) -> Result<PathBuf, CwdError> {
    let requested = requested.unwrap_or("");
    if requested.contains('\0') {
        return Err(CwdError::Invalid(requested.to_owned()));
    }
    let joined = if requested.is_empty() { root.to_path_buf() } else { root.join(requested) };
    let resolved = match joined.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) => {
            // Tell an escape from a plain missing directory by the lexical path, so a probe for a path outside
            // the root learns nothing about what exists there.
            let lexical = normalize_lexically(&joined);
            if !allow_any && !lexical.starts_with(root) {
                return Err(CwdError::Escapes {
                    requested: requested.to_owned(),
                    resolved: lexical,
                    root: root.into(),
                });
            }
            return Err(CwdError::Missing { path: joined, why: "does not exist" });
        }
    };
    if !allow_any && !resolved.starts_with(root) {
        return Err(CwdError::Escapes { requested: requested.to_owned(), resolved, root: root.to_path_buf() });
    }
    if !resolved.is_dir() {
        return Err(CwdError::Missing { path: resolved, why: "is not a directory" });
    }
    Ok(resolved)
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
        assert_eq!(resolve_cwd(&root, None, false).unwrap(), root);
        assert_eq!(resolve_cwd(&root, Some("sub/deeper/.."), false).unwrap(), root.join("sub"));
        let abs = root.join("sub/deeper");
        assert_eq!(resolve_cwd(&root, abs.to_str(), false).unwrap(), abs);
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
            Err(CwdError::Missing { why: "does not exist", .. })
        ));
        assert!(matches!(
            resolve_cwd(&root, Some("file"), false),
            Err(CwdError::Missing { why: "is not a directory", .. })
        ));
        assert!(matches!(resolve_cwd(&root, Some("a\0b"), false), Err(CwdError::Invalid(_))));
    }
}
