//! Atomic file writes: readers see the old state or the whole new file, never a part of it.
//!
//! The temporary file is `.{name}.{pid}.tmp` in the same folder: the leading dot matters because the agent-runner
//! picks up files by prefix alone (`request-`, `clear-`) and does not skip `*.tmp`, so `request-1.json.tmp` would be
//! read half-written and dropped for good. The same folder keeps the rename on one filesystem; the pid keeps two
//! writers of the same name apart.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to a temporary file beside `path`, fsyncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = temporary_path(path);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|err| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {err}", path.display())
    })
}

/// Serialises `value` as pretty JSON with a final newline and writes it atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|err| format!("cannot encode {}: {err}", path.display()))?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

fn temporary_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_name_never_starts_like_a_request() {
        let tmp = temporary_path(Path::new("/ipc/prompts/request-1.json"));
        let name = tmp.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(".request-1.json.") && name.ends_with(".tmp"), "{name}");
        assert_eq!(tmp.parent(), Some(Path::new("/ipc/prompts")));
    }

    #[test]
    fn writes_replace_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        write_atomic(&path, b"one").unwrap();
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\n  \"a\": 1\n}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["result.json"], "no temporary file is left");
    }
}
