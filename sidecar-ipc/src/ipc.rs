//! The layout of the shared IPC folder, as the agent-runner expects it, the names of the files in it, and how they
//! are read and written.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_files::{FolderRules, Reading, Recheck};
use serde::de::DeserializeOwned;

/// The environment twin of `--ipc-root`; `run` also sets it for the orchestrator, so nested calls find the folder.
pub const ROOT_VAR: &str = "SIDECAR_IPC_ROOT";

const REQUEST: &str = "request-";
const RESULT: &str = "result-";
const CLEAR: &str = "clear-";

/// How sidecar-ipc reads its folders: agent-files' rules, with these parameters.
///
/// - `limit`, 8 MiB: the largest files are prompts, text for a model. The largest context windows (about two
///   million tokens) hold about 8 MB of text, so no prompt a model could take is refused, and a hostile file costs
///   at most this much memory. (exec-server's requests are bounded by its HTTP body limit, 1 MiB: they are command
///   lines, not model input.)
/// - `recheck`, every second with inotify or without: a wait here looks at one or two files (a result, `done`) or
///   lists two small folders, which costs next to nothing, and a second is small next to the LLM call every prompt
///   waits for. (exec-server re-checks a folder of requests every 5 s with inotify, every 0.2 s without.)
pub const RULES: FolderRules = FolderRules {
    limit: 8 * 1024 * 1024,
    recheck: Recheck { with_inotify: Duration::from_secs(1), without_inotify: Duration::from_secs(1) },
};

/// Why a folder of the layout could not be made, or a file in it written.
#[derive(Debug)]
pub enum FolderError {
    Create { dir: PathBuf, source: io::Error },
    Encode { path: PathBuf, source: serde_json::Error },
    Write { path: PathBuf, source: io::Error },
}

impl fmt::Display for FolderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FolderError::Create { dir, source } => write!(
                f,
                "cannot create {}: {source} (is the IPC volume mounted and writable? see --ipc-root)",
                dir.display()
            ),
            FolderError::Encode { path, source } => write!(f, "cannot encode {}: {source}", path.display()),
            FolderError::Write { path, source } => write!(f, "cannot write {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for FolderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FolderError::Create { source, .. } | FolderError::Write { source, .. } => Some(source),
            FolderError::Encode { source, .. } => Some(source),
        }
    }
}

/// Creates `dir` and the folders above it.
pub fn create_dir(dir: &Path) -> Result<(), FolderError> {
    std::fs::create_dir_all(dir).map_err(|source| FolderError::Create { dir: dir.to_path_buf(), source })
}

/// The IPC root (`/ipc` in a pod) and every path under it.
#[derive(Debug, Clone)]
pub struct Ipc {
    root: PathBuf,
}

impl Ipc {
    pub fn new(root: PathBuf) -> Self {
        Ipc { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `prompts/`: `request-{id}.json` from the orchestrator, `result-{id}.json` from the agent.
    pub fn prompts(&self) -> PathBuf {
        self.root.join("prompts")
    }

    /// `context/`: `clear-{id}.json` from the orchestrator; never answered.
    pub fn context(&self) -> PathBuf {
        self.root.join("context")
    }

    pub fn request(&self, id: &str) -> PathBuf {
        self.prompts().join(format!("{REQUEST}{id}.json"))
    }

    pub fn result(&self, id: &str) -> PathBuf {
        self.prompts().join(format!("{RESULT}{id}.json"))
    }

    pub fn clear(&self, id: &str) -> PathBuf {
        self.context().join(format!("{CLEAR}{id}.json"))
    }

    /// The run's summary, free-form JSON; the agent surfaces it as the run's result.
    pub fn run_result(&self) -> PathBuf {
        self.root.join("run-result.json")
    }

    /// The end of the run: the agent stops when it appears, so it must come after the run result.
    pub fn done(&self) -> PathBuf {
        self.root.join("done")
    }

    pub fn is_done(&self) -> bool {
        self.done().exists()
    }

    /// Creates `prompts/` and `context/` (the agent creates them too; whoever starts first wins).
    pub fn ensure_dirs(&self) -> Result<(), FolderError> {
        [self.prompts(), self.context()].iter().try_for_each(|dir| create_dir(dir))
    }
}

/// Reads a document from the folders by agent-files' rules ([`agent_files::read_document`]: regular files only,
/// never through a symlink, at most [`RULES`]' limit, never blocking; told apart as ready, unusable, or incomplete
/// and perhaps still being written).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Reading<T> {
    agent_files::read_document(path, RULES.limit)
}

/// Writes a document into the folders: pretty JSON with a final newline, atomically, through an exclusive
/// temporary whose name starts with a dot (so that no reader, the agent-runner included, ever takes it for a
/// request): see [`agent_files::write_atomic`].
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), FolderError> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|source| FolderError::Encode { path: path.to_path_buf(), source })?;
    bytes.push(b'\n');
    write_file(path, &bytes)
}

/// Writes `bytes` to `path` atomically ([`agent_files::write_atomic`]), with the path in the error.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), FolderError> {
    agent_files::write_atomic(path, bytes).map_err(|source| FolderError::Write { path: path.to_path_buf(), source })
}

/// The file names in a folder, sorted; an unreadable folder reads as empty (it is re-read on the next change).
pub fn file_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> =
        entries.filter_map(Result::ok).filter_map(|entry| entry.file_name().into_string().ok()).collect();
    names.sort();
    names
}

/// The id in `request-{id}.json`.
pub fn request_id(name: &str) -> Option<&str> {
    id_between(name, REQUEST)
}

/// The id in `result-{id}.json`.
pub fn result_id(name: &str) -> Option<&str> {
    id_between(name, RESULT)
}

/// Whether the agent-runner would take this file as a request: it matches the prefix alone. Temporary files are
/// never taken here, whatever their name.
pub fn is_request_name(name: &str) -> bool {
    name.starts_with(REQUEST) && !name.ends_with(".tmp")
}

pub fn is_clear_name(name: &str) -> bool {
    name.starts_with(CLEAR) && !name.ends_with(".tmp")
}

/// The longest file name Linux filesystems take, in bytes.
const NAME_MAX: usize = 255;

/// Whether `id` can name a result in the folder: the agent builds `result-{requestId}.json` from a request's own
/// field, so an id such as `../x` must not be used as it is, nor one whose result name would be longer than a file
/// name can be (that result could never be written). The id in the request's file name always fits, since
/// `request-` is longer than `result-`.
pub fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && !id.contains(['/', '\0'])
        && RESULT.len() + id.len() + ".json".len() <= NAME_MAX
}

fn id_between<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    name.strip_prefix(prefix)?.strip_suffix(".json").filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        let ipc = Ipc::new(PathBuf::from("/ipc"));
        assert_eq!(ipc.request("7"), Path::new("/ipc/prompts/request-7.json"));
        assert_eq!(ipc.result("7"), Path::new("/ipc/prompts/result-7.json"));
        assert_eq!(ipc.clear("7"), Path::new("/ipc/context/clear-7.json"));
        assert_eq!(request_id("request-7.json"), Some("7"));
        assert_eq!(request_id("result-7.json"), None);
        assert_eq!(result_id("result-a-b.json"), Some("a-b"));
        assert!(is_request_name("request-7.json") && !is_request_name("request-7.json.tmp"));
        assert!(!is_request_name(".request-7.json.1.tmp"));
        assert!(is_safe_id("1-2-3") && !is_safe_id("../x") && !is_safe_id(""));
        assert!(is_safe_id(&"i".repeat(243)) && !is_safe_id(&"i".repeat(244)), "result-{{id}}.json fits 255 bytes");
    }

    #[test]
    fn documents_are_written_whole_as_pretty_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("request-1.json");
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\n  \"a\": 1\n}\n");
        assert_eq!(file_names(dir.path()), ["request-1.json"], "no temporary file is left");
    }
}
