//! What identifies one version of a file: how a reader tells a file that changed since it last looked from one
//! that did not, without keeping its bytes.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

/// One version of a file. A rename puts another inode under the name; a write changes the size or the modification
/// time. (Two writes of the same size within one tick of the file system's clock, a few milliseconds, look like one
/// version: the reader then judges the later one by the earlier's time, a few milliseconds early.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileVersion {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl FileVersion {
    /// The version of the entry at `path` itself (of a symlink, not of what it points to: links are never read);
    /// `None` when nothing stands under the name.
    pub fn of(path: &Path) -> Option<FileVersion> {
        std::fs::symlink_metadata(path).ok().map(|metadata| FileVersion::from_metadata(&metadata))
    }

    /// The version that `metadata` (of a descriptor, or of a name) describes.
    pub fn from_metadata(metadata: &Metadata) -> FileVersion {
        FileVersion {
            device: metadata.dev(),
            inode: metadata.ino(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        }
    }

    /// When this version was last written, as its file system says.
    pub fn modified(&self) -> Option<SystemTime> {
        self.modified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_or_a_rename_is_a_new_version_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        assert_eq!(FileVersion::of(&path), None);
        std::fs::write(&path, "{").unwrap();
        let first = FileVersion::of(&path).unwrap();
        assert_eq!(FileVersion::of(&path), Some(first), "looking is no change");
        std::fs::write(&path, "{}").unwrap();
        let written = FileVersion::of(&path).unwrap();
        assert_ne!(written, first);
        let other = dir.path().join("other");
        std::fs::write(&other, "{}").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(FileVersion::of(&path).unwrap(), written, "same size, another inode");
    }
}
