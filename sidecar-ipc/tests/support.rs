//! Test helpers: a temporary IPC folder, runs of the real binary with a clean environment, a prompt server in the
//! background, and a fake agent that answers requests however a test needs.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
pub use sidecar_ipc::ipc::{Ipc, ROOT_VAR};
pub use testkit::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_sidecar-ipc");

/// The answer schema most tests ask with: an object with a `tags` array of strings.
pub const TAGS: &str =
    r#"{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}},"required":["tags"]}"#;

/// A temporary IPC root with `prompts/` and `context/`; the paths in it are the library's own layout
/// ([`Ipc`], through `Deref`), so a test names every file the way the subcommands do.
pub struct TestIpc {
    _dir: tempfile::TempDir,
    layout: Ipc,
}

impl std::ops::Deref for TestIpc {
    type Target = Ipc;

    fn deref(&self) -> &Ipc {
        &self.layout
    }
}

impl TestIpc {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let layout = Ipc::new(dir.path().to_path_buf());
        layout.ensure_dirs().unwrap();
        TestIpc { _dir: dir, layout }
    }

    /// The layout alone, for a fake agent on another thread.
    pub fn layout(&self) -> Ipc {
        self.layout.clone()
    }

    /// `run-result.json`, parsed.
    pub fn run_result_json(&self) -> Value {
        read_json(&self.run_result())
    }

    /// A file in the root holding `lines` as JSON lines (replay files).
    pub fn jsonl(&self, name: &str, lines: &[Value]) -> PathBuf {
        let path = self.root().join(name);
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A run of the binary with this root, a clean environment and stdin from /dev/null.
    pub fn cmd<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(&self, args: I) -> BinaryRun {
        self.wrapped(&[BIN.to_owned()]).args(args)
    }

    /// As [`TestIpc::cmd`], started by `argv`, which ends in the binary ([`memory_capped`], [`without_inotify`]).
    pub fn wrapped(&self, argv: &[String]) -> BinaryRun {
        BinaryRun::new(&argv[0]).args(&argv[1..]).env(ROOT_VAR, self.root())
    }

    /// A prompt server in the background (killed when dropped).
    pub fn server(&self, args: &[&str]) -> Server {
        self.wrapped_server(&[BIN.to_owned()], args)
    }

    /// A prompt server with its address space capped ([`memory_capped`]), for files that would make a broken build
    /// read without end.
    pub fn capped_server(&self, args: &[&str]) -> Server {
        self.wrapped_server(&memory_capped(BIN), args)
    }

    /// A prompt server started by `argv`, which ends in the binary.
    pub fn wrapped_server(&self, argv: &[String], args: &[&str]) -> Server {
        let child = self.wrapped(argv).args(["prompt-server"]).args(args).spawn();
        Server { child: Some(child) }
    }

    /// Files in `prompts/` whose names start with `prefix`.
    pub fn prompt_files(&self, prefix: &str) -> Vec<PathBuf> {
        files_starting(&self.prompts(), prefix)
    }
}

pub fn files_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    files.sort();
    files
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}: {text:?}", path.display()))
}

/// A prompt server running in the background.
pub struct Server {
    child: Option<tokio::process::Child>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id().unwrap()
    }

    pub fn terminate(&self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    }

    /// Waits for it to end by itself (it does once `done` appears) and returns what it printed.
    pub async fn finished(mut self) -> Output {
        let child = self.child.take().unwrap();
        tokio::time::timeout(HANG, child.wait_with_output()).await.expect("prompt-server did not end").unwrap()
    }
}

/// JSON lines of an audit file with the given `event`.
pub fn events(path: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["event"] == event)
        .collect()
}

/// A fake agent on a thread: for each new `request-*.json` it calls `answer(layout, request_id, request)`.
/// Stops after `count` requests.
pub fn fake_agent(
    ipc: &TestIpc,
    count: usize,
    answer: impl Fn(&Ipc, &str, &Value) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let ipc = ipc.layout();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let deadline = Instant::now() + HANG;
        while seen.len() < count {
            assert!(Instant::now() < deadline, "the fake agent saw no request");
            for path in files_starting(&ipc.prompts(), "request-") {
                if seen.contains(&path) {
                    continue;
                }
                let request = read_json(&path);
                answer(&ipc, request["requestId"].as_str().unwrap(), &request);
                seen.push(path);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

/// Writes a result the way the agent-runner does: in place, not atomically.
pub fn write_result(ipc: &Ipc, id: &str, result: &Value) {
    std::fs::write(ipc.result(id), result.to_string()).unwrap();
}
