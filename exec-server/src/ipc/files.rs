//! File names of the protocol, claims, the folder's reading rules, request reads and atomic result writes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_files::{FolderRules, Reading, Recheck};

use super::request::{ToolRequest, ToolResult};

/// How exec-server reads its folder: agent-files' rules, with these parameters.
///
/// - `limit`, 1 MiB: the HTTP body's limit, since a request carries the same things as a `POST /exec` (a command
///   line, its stdin). (sidecar-ipc reads up to 8 MiB: its files are prompts, text for a model.)
/// - `recheck.with_inotify`, 5 s: a rescan lists the folder and looks at every request in it (a request's result
///   and claim, and a read of each one not answered yet), and an agent that never cleans up leaves thousands, so it
///   is kept rare; it only matters on a volume that does not report changes. (sidecar-ipc re-checks every second: a
///   wait there looks at one or two files.)
/// - `recheck.without_inotify`, 0.2 s: the poll of the shell executor this replaces (`tool-executor.sh`), so
///   without inotify exec-server answers no later than it did.
pub const RULES: FolderRules = FolderRules {
    limit: protocol::MAX_BODY_BYTES as u64,
    recheck: Recheck { with_inotify: Duration::from_secs(5), without_inotify: Duration::from_millis(200) },
};

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

/// Reads a request file by agent-files' rules ([`agent_files::read_document`]: a regular file of at most
/// [`RULES`]' limit, never through a symlink, never blocking; ready, unusable, or incomplete and perhaps still
/// being written).
pub fn read_request(dir: &Path, id: &str) -> Reading<ToolRequest> {
    agent_files::read_document(&request_path(dir, id), RULES.limit)
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
