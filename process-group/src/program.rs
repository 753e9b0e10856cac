//! Finding the program a command names, as a shell does: a name with a `/` is a path; any other name is looked up
//! in the directories of PATH, in order, and the first regular file with an execute bit is the program.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The search path of a command whose environment has no PATH: the shell's usual default.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `program` is looked up on PATH (it has no `/`), rather than taken as a path.
pub fn is_bare_name(program: &OsStr) -> bool {
    !program.as_bytes().contains(&b'/')
}

/// Every executable file named `program` in the directories of `path`, in order. An empty entry means `cwd`, and
/// relative entries are relative to `cwd` (the directory the command will run in), as a shell reads them.
pub fn executables_on_path<'a>(
    program: &'a OsStr,
    path: &'a OsStr,
    cwd: &'a Path,
) -> impl Iterator<Item = PathBuf> + 'a {
    std::env::split_paths(path)
        .map(move |dir| if dir.as_os_str().is_empty() { cwd.to_path_buf() } else { cwd.join(dir) })
        .map(move |dir| dir.join(program))
        .filter(|candidate| is_executable_file(candidate))
}

/// A regular file (after symlinks) with at least one execute bit.
pub fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_first_executable_in_path_order_wins() {
        let cwd = tempfile::tempdir().unwrap();
        for (dir, mode) in [("a", 0o644), ("b", 0o755), ("c", 0o755)] {
            std::fs::create_dir(cwd.path().join(dir)).unwrap();
            let file = cwd.path().join(dir).join("tool");
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::create_dir(cwd.path().join("d")).unwrap();
        std::fs::create_dir(cwd.path().join("d/tool")).unwrap();
        let found: Vec<PathBuf> = executables_on_path(OsStr::new("tool"), OsStr::new("d:a:b:c"), cwd.path()).collect();
        assert_eq!(found, [cwd.path().join("b/tool"), cwd.path().join("c/tool")], "not a folder, not 0644");
        let empty_is_cwd = executables_on_path(OsStr::new("b"), OsStr::new(":"), cwd.path()).next();
        assert_eq!(empty_is_cwd, None, "a folder named b in cwd is no program");
        assert!(is_bare_name(OsStr::new("ls")) && !is_bare_name(OsStr::new("./ls")));
    }
}
