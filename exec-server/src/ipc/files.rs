//! File names of the protocol, claims, and atomic result writes.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::request::ToolResult;

const REQUEST_PREFIX: &str = "exec-request-";
const RESULT_PREFIX: &str = "exec-result-";
const CLAIM_PREFIX: &str = ".claim-";

/// The id of a request file name (`exec-request-{id}.json`), or `None` for any other file (results, temporaries,
/// `mcp-*` files of other tools that share the folder).
pub fn request_id(name: &str) -> Option<&str> {
    let id = name.strip_prefix(REQUEST_PREFIX)?.strip_suffix(".json")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The id of a result file name (`exec-result-{id}.json`).
pub fn result_id(name: &str) -> Option<&str> {
    name.strip_prefix(RESULT_PREFIX)?.strip_suffix(".json").filter(|id| !id.is_empty())
}

/// The id of a claim folder name (`.claim-{id}`).
pub fn claim_id(name: &str) -> Option<&str> {
    name.strip_prefix(CLAIM_PREFIX).filter(|id| !id.is_empty())
}

pub fn request_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{REQUEST_PREFIX}{id}.json"))
}

pub fn result_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{RESULT_PREFIX}{id}.json"))
}

pub fn claim_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{CLAIM_PREFIX}{id}"))
}

/// Claims a request with `mkdir` (atomic: among executors sharing the folder exactly one succeeds).
/// `Ok(false)` when someone else holds it.
pub fn claim(dir: &Path, id: &str) -> std::io::Result<bool> {
    match std::fs::create_dir(claim_path(dir, id)) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    }
}

/// Writes the result under a temporary name that no reader looks for, then renames it into place, so the agent
/// never reads half a result.
pub fn write_result(dir: &Path, result: &ToolResult) -> std::io::Result<()> {
    let temporary = dir.join(format!(".{RESULT_PREFIX}{}.json.tmp", result.id));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&serde_json::to_vec(result).map_err(std::io::Error::other)?)?;
        std::fs::rename(&temporary, result_path(dir, &result.id))
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(request_id("exec-request-171.json"), Some("171"));
        assert_eq!(request_id("exec-request-.json"), None);
        assert_eq!(request_id("exec-request-171.json.tmp"), None);
        assert_eq!(request_id("mcp-request-171.json"), None);
        assert_eq!(request_id("exec-result-171.json"), None);
        assert_eq!(result_id("exec-result-171.json"), Some("171"));
        assert_eq!(claim_id(".claim-171"), Some("171"));
    }

    #[test]
    fn claims_are_exclusive_and_results_atomic() {
        let dir = tempfile::tempdir().unwrap();
        assert!(claim(dir.path(), "1").unwrap());
        assert!(!claim(dir.path(), "1").unwrap());
        write_result(dir.path(), &ToolResult::refused("1", 2, "x")).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(result_path(dir.path(), "1").exists());
    }
}
