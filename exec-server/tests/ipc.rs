//! The tool-sidecar file protocol, served by the real binary (`--ipc-dir`), against files written as the agent
//! writes them.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_exec-server");

/// A temporary `/ipc` with `tools/` inside and a workspace beside it.
struct IpcRoot {
    root: tempfile::TempDir,
}

impl IpcRoot {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("ipc/tools")).unwrap();
        std::fs::create_dir_all(root.path().join("workspace")).unwrap();
        IpcRoot { root }
    }

    fn tools(&self) -> PathBuf {
        self.root.path().join("ipc/tools")
    }

    fn workspace(&self) -> PathBuf {
        self.root.path().join("workspace")
    }

    fn done(&self) {
        std::fs::write(self.root.path().join("ipc/done"), "").unwrap();
    }

    /// Starts an executor on this folder and waits for its "watching" log line.
    fn executor(&self, args: &[&str]) -> Executor {
        self.executor_with_env(args, &[])
    }

    fn executor_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Executor {
        let mut child = Command::new(BIN)
            .arg("--ipc-dir")
            .arg(self.tools())
            .arg("--cwd")
            .arg(self.workspace())
            .args(["--grace", "0.5"])
            .args(args)
            .env_remove("EXEC_SERVER_PORT")
            .env_remove("SYMPOZIUM_SKILL_PACK")
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(log.read_line(&mut line).unwrap() > 0, "executor exited before watching");
            if line.contains("watching for tool requests") {
                break;
            }
        }
        std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
        Executor { child }
    }

    /// Writes a request the way the agent does: a plain, non-atomic write.
    fn request(&self, id: &str, body: &Value) {
        std::fs::write(self.tools().join(format!("exec-request-{id}.json")), body.to_string()).unwrap();
    }

    fn result_path(&self, id: &str) -> PathBuf {
        self.tools().join(format!("exec-result-{id}.json"))
    }

    /// Waits for a result and parses it.
    fn result(&self, id: &str, within: Duration) -> Value {
        let path = self.result_path(id);
        let deadline = Instant::now() + within;
        while !path.exists() {
            assert!(Instant::now() < deadline, "no result for {id}");
            std::thread::sleep(Duration::from_millis(5));
        }
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }
}

struct Executor {
    child: Child,
}

impl Executor {
    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "executor did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SOON: Duration = Duration::from_secs(10);

#[test]
fn shell_and_argv_modes() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    ipc.request("1", &json!({"id": "1", "command": "echo hi | tr a-z A-Z; printf '%s|'", "args": ["a", "b c"]}));
    let result = ipc.result("1", SOON);
    assert_eq!(result, json!({"id": "1", "exitCode": 0, "stdout": "HI\na|b|c|", "stderr": "", "timedOut": false}));

    // argv mode: no shell, arguments arrive exactly (a newline and shell syntax included), stdin piped in.
    let tricky = "two\nlines; rm -rf / $(id)";
    ipc.request("2", &json!({"argv": ["sh", "-c", "printf '[%s]' \"$1\"; cat; pwd", "sh", tricky], "stdin": "IN\n", "command": "ignored"}));
    let result = ipc.result("2", SOON);
    let workspace = ipc.workspace().canonicalize().unwrap();
    assert_eq!(result["stdout"], format!("[{tricky}]IN\n{}\n", workspace.display()));
    assert_eq!(result["exitCode"], 0);

    // workDir, exit codes, signals, a program that is not there.
    ipc.request("3", &json!({"command": "pwd; exit 7", "workDir": "/tmp"}));
    assert_eq!(ipc.result("3", SOON)["stdout"], "/tmp\n");
    assert_eq!(ipc.result("3", SOON)["exitCode"], 7);
    ipc.request("4", &json!({"command": "kill -9 $$"}));
    assert_eq!(ipc.result("4", SOON)["exitCode"], 137);
    ipc.request("5", &json!({"argv": ["no-such-program-xyz"]}));
    let result = ipc.result("5", SOON);
    assert_eq!(result["exitCode"], 127);
    assert!(result["stderr"].as_str().unwrap().contains("no-such-program-xyz: not found"));
    ipc.request("6", &json!({"id": "6"}));
    let result = ipc.result("6", SOON);
    assert_eq!(result["exitCode"], 2);
    assert!(result["stderr"].as_str().unwrap().contains("neither a command nor an argv"));
}

#[test]
fn output_is_cut_at_exactly_51200_bytes() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    ipc.request("exact", &json!({"command": "head -c 51200 /dev/zero | tr '\\0' a"}));
    ipc.request(
        "over",
        &json!({"command": "head -c 51201 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2"}),
    );
    let exact = ipc.result("exact", SOON);
    assert_eq!(exact["stdout"].as_str().unwrap(), "a".repeat(51_200));
    let over = ipc.result("over", SOON);
    assert_eq!(over["stdout"].as_str().unwrap(), format!("{}...(truncated)", "a".repeat(51_200)));
    assert_eq!(over["stderr"].as_str().unwrap(), format!("{}...(truncated)", "b".repeat(51_200)));
}

#[test]
fn a_term_ignoring_command_times_out_with_its_whole_group() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    let marker = marker();
    let started = Instant::now();
    ipc.request(
        "t",
        &json!({"command": format!("trap '' TERM; ({} &); {}", sleeper(&marker), sleeper(&marker)), "timeout": 1}),
    );
    let result = ipc.result("t", SOON);
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!((result["exitCode"].as_i64(), result["timedOut"].as_bool()), (Some(124), Some(true)));
    assert_no_survivors(&marker, Duration::from_secs(5));
}

#[test]
fn an_empty_file_that_becomes_valid_runs_once() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    let path = ipc.tools().join("exec-request-e.json");
    std::fs::write(&path, "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Half a document, then the rest, as a non-atomic writer leaves it.
    std::fs::write(&path, r#"{"command": "echo ran >> "#).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(&path, r#"{"command": "echo ran >> count; cat count"}"#).unwrap();
    let result = ipc.result("e", SOON);
    assert_eq!(result["stdout"], "ran\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read_to_string(ipc.workspace().join("count")).unwrap(), "ran\n", "ran more than once");
}

#[test]
fn a_file_that_never_becomes_valid_gets_a_clear_error() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    std::fs::write(ipc.tools().join("exec-request-bad.json"), "{not json").unwrap();
    std::fs::write(ipc.tools().join("exec-request-empty.json"), "").unwrap();
    let bad = ipc.result("bad", SOON);
    assert_eq!(bad["exitCode"], 2);
    assert!(bad["stderr"].as_str().unwrap().contains("is not a valid request"), "{bad}");
    let empty = ipc.result("empty", SOON);
    assert!(empty["stderr"].as_str().unwrap().contains("stayed empty"), "{empty}");
}

#[test]
fn foreign_files_and_given_up_requests_are_left_alone() {
    let ipc = IpcRoot::new();
    // Present before the executor starts: still noticed.
    ipc.request("before", &json!({"command": "echo early"}));
    let _executor = ipc.executor(&[]);
    std::fs::write(ipc.tools().join("mcp-request-1.json"), json!({"command": "touch mcp"}).to_string()).unwrap();
    std::fs::write(ipc.tools().join("exec-request-2.json.tmp"), json!({"command": "touch tmp"}).to_string()).unwrap();
    // A request whose deadline (timeout 1 s + the agent's 10 s) passed long ago, moved into place.
    let stale = ipc.tools().join("staging");
    std::fs::write(&stale, json!({"command": "touch stale", "timeout": 1}).to_string()).unwrap();
    let old = SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(old).unwrap();
    std::fs::rename(&stale, ipc.tools().join("exec-request-stale.json")).unwrap();
    // An answered request is not run again.
    std::fs::write(ipc.result_path("answered"), "{}").unwrap();
    ipc.request("answered", &json!({"command": "touch answered"}));

    assert_eq!(ipc.result("before", SOON)["stdout"], "early\n");
    ipc.request("after", &json!({"command": "echo late"}));
    assert_eq!(ipc.result("after", SOON)["stdout"], "late\n");
    for name in ["mcp", "tmp", "stale", "answered"] {
        assert!(!ipc.workspace().join(name).exists(), "{name} ran");
    }
    assert!(!ipc.result_path("stale").exists());
}

#[test]
fn routing_by_target_between_two_executors() {
    let ipc = IpcRoot::new();
    // As the platform sets it: the variable, which commands see too.
    let _alpha = ipc.executor_with_env(&[], &[("SYMPOZIUM_SKILL_PACK", "Alpha Pack")]);
    let _beta = ipc.executor_with_env(&["-skill-pack", "beta"], &[("SYMPOZIUM_SKILL_PACK", "beta")]);
    let cases = [("1", " alphapack "), ("2", "BETA"), ("3", "Alpha\tPack"), ("4", "be ta")];
    for (id, target) in cases {
        ipc.request(id, &json!({"command": "echo $SYMPOZIUM_SKILL_PACK", "target": target}));
    }
    assert_eq!(ipc.result("1", SOON)["stdout"], "Alpha Pack\n");
    assert_eq!(ipc.result("2", SOON)["stdout"], "beta\n");
    assert_eq!(ipc.result("3", SOON)["stdout"], "Alpha Pack\n");
    assert_eq!(ipc.result("4", SOON)["stdout"], "beta\n");
    // A target nobody serves stays unanswered; an empty one goes to whoever claims it first.
    ipc.request("5", &json!({"command": "echo x", "target": "gamma"}));
    ipc.request("6", &json!({"command": "echo any", "target": ""}));
    assert_eq!(ipc.result("6", SOON)["stdout"], "any\n");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ipc.result_path("5").exists());
}

#[test]
fn two_executors_racing_answer_each_request_exactly_once() {
    let ipc = IpcRoot::new();
    let _one = ipc.executor(&[]);
    let _two = ipc.executor(&[]);
    let ids: Vec<String> = (0..40).map(|i| format!("race{i}")).collect();
    for id in &ids {
        ipc.request(id, &json!({"command": format!("echo {id} >> ran.log")}));
    }
    for id in &ids {
        assert_eq!(ipc.result(id, SOON)["exitCode"], 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(ipc.workspace().join("ran.log")).unwrap();
    let mut ran: Vec<&str> = log.lines().collect();
    ran.sort_unstable();
    let mut expected: Vec<&str> = ids.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(ran, expected, "some request ran twice or never");
}

#[test]
fn claims_go_once_request_and_result_are_gone() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    ipc.request("c", &json!({"command": "true"}));
    ipc.result("c", SOON);
    let claim = ipc.tools().join(".claim-c");
    assert!(claim.is_dir());
    std::fs::remove_file(ipc.tools().join("exec-request-c.json")).unwrap();
    std::fs::remove_file(ipc.result_path("c")).unwrap();
    let deadline = Instant::now() + SOON;
    while claim.exists() {
        assert!(Instant::now() < deadline, "claim folder left behind");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn done_ends_the_server_with_nothing_left_running() {
    let ipc = IpcRoot::new();
    let mut executor = ipc.executor(&[]);
    let marker = marker();
    ipc.request("long", &json!({"command": format!("trap '' TERM; {}", sleeper(&marker)), "timeout": 100}));
    wait_for_process(&marker);
    let started = Instant::now();
    ipc.done();
    let status = executor.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_millis(1500), "exit took {:?}", started.elapsed());
    assert_no_survivors(&marker, Duration::from_millis(200));
    let result: Value = serde_json::from_slice(&std::fs::read(ipc.result_path("long")).unwrap()).unwrap();
    assert!(result["stderr"].as_str().unwrap().contains("cancelled"), "{result}");

    // Started after the run is done: exits at once.
    let mut late = ipc.executor(&[]);
    assert!(late.wait_exit(Duration::from_secs(5)).success());
}

/// `--ipc-max-timeout` caps a request's timeout, `--ipc-parallel 1` runs one request at a time, and `--ipc-done`
/// names another end-of-run file.
#[test]
fn timeout_cap_parallelism_and_a_custom_done_file() {
    let ipc = IpcRoot::new();
    let done = ipc.root.path().join("finished");
    let done_arg = done.to_str().unwrap().to_owned();
    let mut executor = ipc.executor(&["--ipc-max-timeout", "1", "--ipc-parallel", "1", "--ipc-done", &done_arg]);
    let started = Instant::now();
    ipc.request("capped", &json!({"command": "sleep 30", "timeout": 100}));
    let result = ipc.result("capped", SOON);
    assert_eq!((result["exitCode"].as_i64(), result["timedOut"].as_bool()), (Some(124), Some(true)));
    assert!(started.elapsed() < Duration::from_secs(5), "the cap did not apply: {:?}", started.elapsed());

    // One slot: the second request starts only after the first has finished.
    ipc.request("a", &json!({"command": "date +%s%N > a.start; sleep 0.3; date +%s%N > a.end"}));
    ipc.request("b", &json!({"command": "date +%s%N > b.start"}));
    ipc.result("a", SOON);
    ipc.result("b", SOON);
    let read =
        |name: &str| -> u128 { std::fs::read_to_string(ipc.workspace().join(name)).unwrap().trim().parse().unwrap() };
    let (a_start, a_end, b_start) = (read("a.start"), read("a.end"), read("b.start"));
    assert!(b_start >= a_end || b_start < a_start, "two requests ran at once with --ipc-parallel 1");

    // The default done file does nothing here; the configured one ends the server.
    ipc.done();
    std::thread::sleep(Duration::from_millis(300));
    assert!(executor.child.try_wait().unwrap().is_none(), "the default done file ended a server told to watch another");
    std::fs::write(&done, "").unwrap();
    assert!(executor.wait_exit(Duration::from_secs(5)).success());
}
