//! File names of the protocol, claims, bounded request reads and atomic result writes.

use std::path::{Path, PathBuf};

use agent_files::{Contents, ReadError};

use super::request::ToolResult;

/// The most a request file may hold: the HTTP body's limit (1 MiB), since a request carries the same things.
pub const REQUEST_LIMIT: usize = protocol::MAX_BODY_BYTES;

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

/// Reads a request file by the rules of [`agent_files::read_regular_file`]: a regular file of at most
/// [`REQUEST_LIMIT`] bytes, never through a symlink, never blocking.
pub fn read_request(dir: &Path, id: &str) -> Result<Contents, ReadError> {
    agent_files::read_regular_file(&request_path(dir, id), REQUEST_LIMIT as u64)
}

/// Writes the result atomically (the agent never reads half a result) through an exclusive temporary of a short
/// name: nothing planted in the folder is written through, and the longest ids still get their result (a result
/// name is one byte shorter than its request's, which existed).
pub fn write_result(dir: &Path, result: &ToolResult) -> std::io::Result<()> {
    agent_files::write_atomic(
        &result_path(dir, &result.id),
        &serde_json::to_vec(result).map_err(std::io::Error::other)?,
    )
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
