//! A spill file without a name: made with `O_TMPFILE` in the state folder, or, where the filesystem has none,
//! created (0600) and unlinked at once. No command can open it by name; only the server's descriptor reaches it,
//! and the server is not dumpable (see `privacy`), so its descriptors are closed to the commands too.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A new file for reading and writing, in `path`'s folder, with no name left in it.
pub fn create_unnamed(path: &Path) -> std::io::Result<File> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let unnamed =
        std::fs::OpenOptions::new().read(true).write(true).mode(0o600).custom_flags(nix::libc::O_TMPFILE).open(folder);
    match unnamed {
        Ok(file) => Ok(file),
        // No O_TMPFILE here (an old kernel says EISDIR; a filesystem without it EOPNOTSUPP): the name exists only
        // until the unlink, private to the server's user in its 0700 folder.
        Err(err) if matches!(err.raw_os_error(), Some(nix::libc::EOPNOTSUPP | nix::libc::EISDIR)) => {
            let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)?;
            std::fs::remove_file(path)?;
            Ok(file)
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, Write};

    use super::*;

    #[test]
    fn the_file_works_and_leaves_no_name() {
        let folder = tempfile::tempdir().unwrap();
        let mut file = create_unnamed(&folder.path().join("run.0.stdout")).unwrap();
        file.write_all(b"kept").unwrap();
        file.rewind().unwrap();
        let mut back = String::new();
        file.read_to_string(&mut back).unwrap();
        assert_eq!(back, "kept");
        assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 0);
    }
}
