//! The tool-sidecar file protocol, served by the real binary (`--ipc-dir`), against files written as the agent
//! writes them.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
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
    fn executor(&self, args: &[&str]) -> Running {
        self.executor_with_env(args, &[])
    }

    fn executor_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Running {
        self.spawn_executor(Command::new(BIN), args, env)
    }

    /// An executor with its address space capped ([`memory_capped`]), for requests that would make a broken build
    /// read without end.
    fn capped_executor(&self) -> Running {
        self.wrapped_executor(&memory_capped(BIN))
    }

    /// An executor that cannot have inotify ([`without_inotify`]).
    fn executor_without_inotify(&self) -> Running {
        self.wrapped_executor(&without_inotify(BIN))
    }

    /// An executor started by `argv`, which ends in the binary.
    fn wrapped_executor(&self, argv: &[String]) -> Running {
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        self.spawn_executor(command, &[], &[])
    }

    fn spawn_executor(&self, mut command: Command, args: &[&str], env: &[(&str, &str)]) -> Running {
        command
            .arg("--ipc-dir")
            .arg(self.tools())
            .arg("--cwd")
            .arg(self.workspace())
            .args(["--grace", "0.5"])
            .args(args)
            .env_remove("EXEC_SERVER_PORT")
            .env_remove("SYMPOZIUM_SKILL_PACK")
            .envs(env.iter().copied());
        Running::start(command, |line| line.contains("watching for tool requests")).0
    }

    /// Writes a request the way the agent does: a plain, non-atomic write.
    fn request(&self, id: &str, body: &Value) {
        std::fs::write(self.tools().join(format!("exec-request-{id}.json")), body.to_string()).unwrap();
    }

    fn result_path(&self, id: &str) -> PathBuf {
        self.tools().join(format!("exec-result-{id}.json"))
    }

    /// Waits for a result (it is renamed into place whole) and parses it.
    fn result(&self, id: &str) -> Value {
        let path = self.result_path(id);
        wait_until(&format!("the result of {id}"), || path.exists());
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }
}

/// A hang guard for an executor's exit (never a timing assertion).
const SOON: Duration = Duration::from_secs(10);
/// Peak resident memory a server that refused hostile requests may have reached: it never read more than 1 MiB of
/// any of them.
const SMALL_RSS: u64 = 64 * 1024 * 1024;

#[test]
fn shell_and_argv_modes() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    ipc.request("1", &json!({"id": "1", "command": "echo hi | tr a-z A-Z; printf '%s|'", "args": ["a", "b c"]}));
    let result = ipc.result("1");
    assert_eq!(result, json!({"id": "1", "exitCode": 0, "stdout": "HI\na|b|c|", "stderr": "", "timedOut": false}));

    // argv mode: no shell, arguments arrive exactly (a newline and shell syntax included), stdin piped in.
    let tricky = "two\nlines; rm -rf / $(id)";
    ipc.request("2", &json!({"argv": ["sh", "-c", "printf '[%s]' \"$1\"; cat; pwd", "sh", tricky], "stdin": "IN\n", "command": "ignored"}));
    let result = ipc.result("2");
    let workspace = ipc.workspace().canonicalize().unwrap();
    assert_eq!(result["stdout"], format!("[{tricky}]IN\n{}\n", workspace.display()));
    assert_eq!(result["exitCode"], 0);

    // workDir, exit codes, signals, a program that is not there.
    ipc.request("3", &json!({"command": "pwd; exit 7", "workDir": "/tmp"}));
    assert_eq!(ipc.result("3")["stdout"], "/tmp\n");
    assert_eq!(ipc.result("3")["exitCode"], 7);
    ipc.request("4", &json!({"command": "kill -9 $$"}));
    assert_eq!(ipc.result("4")["exitCode"], 137);
    ipc.request("5", &json!({"argv": ["no-such-program-xyz"]}));
    let result = ipc.result("5");
    assert_eq!(result["exitCode"], 127);
    assert!(result["stderr"].as_str().unwrap().contains("no-such-program-xyz: not found"));
    ipc.request("6", &json!({"id": "6"}));
    let result = ipc.result("6");
    assert_eq!(result["exitCode"], 2);
    assert!(result["stderr"].as_str().unwrap().contains("neither a command nor an argv"));

    // Start failures get the shell's codes by what failed, not by the words in a path (before, this one was 126).
    let missing = ipc.workspace().join("permission denied");
    ipc.request("7", &json!({"argv": ["true"], "workDir": missing}));
    let result = ipc.result("7");
    assert_eq!(result["exitCode"], 1, "{result}");
    let expected = format!("working directory {} does not exist", missing.display());
    assert!(result["stderr"].as_str().unwrap().contains(&expected), "{result}");
    std::fs::write(ipc.workspace().join("not-executable"), "#!/bin/sh\n").unwrap();
    ipc.request("8", &json!({"argv": ["./not-executable"]}));
    assert_eq!(ipc.result("8")["exitCode"], 126);
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
    let exact = ipc.result("exact");
    assert_eq!(exact["stdout"].as_str().unwrap(), "a".repeat(51_200));
    let over = ipc.result("over");
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
    let result = ipc.result("t");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!((result["exitCode"].as_i64(), result["timedOut"].as_bool()), (Some(124), Some(true)));
    assert_no_survivors(&marker, Duration::from_secs(5));
}

#[test]
fn an_empty_file_that_becomes_valid_runs_once() {
    let ipc = IpcRoot::new();
    // One request at a time, taken in the order their files appear: once a later request has run, so has any
    // second run of this one.
    let _executor = ipc.executor(&["--ipc-parallel", "1"]);
    let path = ipc.tools().join("exec-request-e.json");
    std::fs::write(&path, "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Half a document, then the rest, as a non-atomic writer leaves it.
    std::fs::write(&path, r#"{"command": "echo ran >> "#).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(&path, r#"{"command": "echo ran >> count; cat count"}"#).unwrap();
    let result = ipc.result("e");
    assert_eq!(result["stdout"], "ran\n");
    ipc.request("later", &json!({"command": "cat count"}));
    assert_eq!(ipc.result("later")["stdout"], "ran\n", "ran more than once");
}

#[test]
fn a_file_that_never_becomes_valid_gets_a_clear_error() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    std::fs::write(ipc.tools().join("exec-request-bad.json"), "{not json").unwrap();
    std::fs::write(ipc.tools().join("exec-request-empty.json"), "").unwrap();
    std::fs::write(ipc.tools().join("exec-request-blank.json"), " \n").unwrap();
    // Complete JSON that is no request: no later write can be pending (a prefix of JSON is never JSON), so it is
    // answered as it is, without the wait for a writer (before, it was waited on like a half-written file).
    std::fs::write(ipc.tools().join("exec-request-shape.json"), r#"{"command": 5}"#).unwrap();
    let bad = ipc.result("bad");
    assert_eq!(bad["exitCode"], 2);
    assert!(bad["stderr"].as_str().unwrap().contains("is not a valid request"), "{bad}");
    assert!(bad["stderr"].as_str().unwrap().contains("after 2 s without a change"), "{bad}");
    let empty = ipc.result("empty");
    assert!(empty["stderr"].as_str().unwrap().contains("stayed empty"), "{empty}");
    let blank = ipc.result("blank");
    assert!(blank["stderr"].as_str().unwrap().contains("stayed empty"), "whitespace is empty too: {blank}");
    let shape = refused(&ipc, "shape");
    assert!(shape.contains("is not a valid request: invalid type: integer `5`, expected a string"), "{shape}");
    assert!(!shape.contains("without a change"), "waited for a writer: {shape}");
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

    assert_eq!(ipc.result("before")["stdout"], "early\n");
    ipc.request("after", &json!({"command": "echo late"}));
    assert_eq!(ipc.result("after")["stdout"], "late\n");
    for name in ["mcp", "tmp", "stale", "answered"] {
        assert!(!ipc.workspace().join(name).exists(), "{name} ran");
    }
    assert!(!ipc.result_path("stale").exists());
}

#[test]
fn routing_by_target_between_two_executors() {
    let ipc = IpcRoot::new();
    // As the platform sets it: the variable, which commands see too. One request at a time each, in the order their
    // files appear (see below).
    let _alpha = ipc.executor_with_env(&["--ipc-parallel", "1"], &[("SYMPOZIUM_SKILL_PACK", "Alpha Pack")]);
    let _beta =
        ipc.executor_with_env(&["-skill-pack", "beta", "--ipc-parallel", "1"], &[("SYMPOZIUM_SKILL_PACK", "beta")]);
    let cases = [("1", " alphapack "), ("2", "BETA"), ("3", "Alpha\tPack"), ("4", "be ta")];
    for (id, target) in cases {
        ipc.request(id, &json!({"command": "echo $SYMPOZIUM_SKILL_PACK", "target": target}));
    }
    assert_eq!(ipc.result("1")["stdout"], "Alpha Pack\n");
    assert_eq!(ipc.result("2")["stdout"], "beta\n");
    assert_eq!(ipc.result("3")["stdout"], "Alpha Pack\n");
    assert_eq!(ipc.result("4")["stdout"], "beta\n");
    // A target nobody serves stays unanswered; an empty one goes to whoever claims it first.
    ipc.request("5", &json!({"command": "echo x", "target": "gamma"}));
    ipc.request("6", &json!({"command": "echo any", "target": ""}));
    assert_eq!(ipc.result("6")["stdout"], "any\n");
    // Once each executor has answered a request written after 5, neither took 5.
    ipc.request("7", &json!({"command": "true", "target": "alphapack"}));
    ipc.request("8", &json!({"command": "true", "target": "beta"}));
    ipc.result("7");
    ipc.result("8");
    assert!(!ipc.result_path("5").exists());
}

#[test]
fn two_executors_racing_answer_each_request_exactly_once() {
    let ipc = IpcRoot::new();
    // One request at a time each, in the order their files appear (see below); requests without a target go to
    // whichever claims them first.
    let _one = ipc.executor(&["-skill-pack", "one", "--ipc-parallel", "1"]);
    let _two = ipc.executor(&["-skill-pack", "two", "--ipc-parallel", "1"]);
    let ids: Vec<String> = (0..40).map(|i| format!("race{i}")).collect();
    for id in &ids {
        ipc.request(id, &json!({"command": format!("echo {id} >> ran.log")}));
    }
    for id in &ids {
        assert_eq!(ipc.result(id)["exitCode"], 0);
    }
    // Once each executor has answered a request written after all of them, any second run has happened.
    ipc.request("last-one", &json!({"command": "true", "target": "one"}));
    ipc.request("last-two", &json!({"command": "true", "target": "two"}));
    ipc.result("last-one");
    ipc.result("last-two");
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
    ipc.result("c");
    let claim = ipc.tools().join(".claim-c");
    assert!(claim.is_dir());
    std::fs::remove_file(ipc.tools().join("exec-request-c.json")).unwrap();
    std::fs::remove_file(ipc.result_path("c")).unwrap();
    wait_until("the claim folder to go", || !claim.exists());
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
    let status = executor.wait_exit(SOON);
    assert!(status.success(), "{status:?}");
    // Within grace (0.5 s) + 1 s by design; the bound leaves a loaded machine room, and is far from the command's
    // own 100 s.
    assert!(started.elapsed() < Duration::from_secs(10), "exit took {:?}", started.elapsed());
    assert_no_survivors(&marker, Duration::from_secs(2));
    let result: Value = serde_json::from_slice(&std::fs::read(ipc.result_path("long")).unwrap()).unwrap();
    assert!(result["stderr"].as_str().unwrap().contains("cancelled"), "{result}");

    // Started after the run is done: exits at once.
    let mut late = ipc.executor(&[]);
    assert!(late.wait_exit(SOON).success());
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
    let result = ipc.result("capped");
    assert_eq!((result["exitCode"].as_i64(), result["timedOut"].as_bool()), (Some(124), Some(true)));
    assert!(started.elapsed() < Duration::from_secs(20), "the cap did not apply: {:?}", started.elapsed());

    // One slot: the second request starts only after the first has finished.
    ipc.request("a", &json!({"command": "date +%s%N > a.start; sleep 0.3; date +%s%N > a.end"}));
    ipc.request("b", &json!({"command": "date +%s%N > b.start"}));
    ipc.result("a");
    ipc.result("b");
    let read =
        |name: &str| -> u128 { std::fs::read_to_string(ipc.workspace().join(name)).unwrap().trim().parse().unwrap() };
    let (a_start, a_end, b_start) = (read("a.start"), read("a.end"), read("b.start"));
    assert!(b_start >= a_end || b_start < a_start, "two requests ran at once with --ipc-parallel 1");

    // The default done file does nothing here: a request written after it is still answered (a server that stopped
    // for it would have seen it first). The configured one ends the server.
    ipc.done();
    ipc.request("after-done", &json!({"command": "echo still here"}));
    assert_eq!(ipc.result("after-done")["stdout"], "still here\n");
    assert!(executor.child.try_wait().unwrap().is_none(), "the default done file ended a server told to watch another");
    std::fs::write(&done, "").unwrap();
    assert!(executor.wait_exit(SOON).success());
}

/// Waits for the result of a request that was refused (exit code 2) and returns its stderr.
fn refused(ipc: &IpcRoot, id: &str) -> String {
    let result = ipc.result(id);
    assert_eq!(result["exitCode"], 2, "{result}");
    result["stderr"].as_str().unwrap().to_owned()
}

/// A FIFO, or a symlink to one, as a request: before, opening it blocked the transport for good (no other request
/// answered, `done` and SIGTERM ignored). Now each gets an error result and nothing waits on them.
#[test]
fn fifo_requests_block_nothing_and_done_still_ends_the_run() {
    let ipc = IpcRoot::new();
    mkfifo(&ipc.tools().join("exec-request-early.json"));
    let mut executor = ipc.executor(&[]);
    let pipe = ipc.root.path().join("pipe");
    mkfifo(&pipe);
    std::os::unix::fs::symlink(&pipe, ipc.tools().join("exec-request-linked.json")).unwrap();
    mkfifo(&ipc.tools().join("exec-request-late.json"));
    ipc.request("ok", &json!({"command": "echo fine"}));
    assert_eq!(ipc.result("ok")["stdout"], "fine\n");
    assert!(refused(&ipc, "early").contains("is a FIFO"));
    assert!(refused(&ipc, "late").contains("is a FIFO"));
    assert!(refused(&ipc, "linked").contains("is a symbolic link"));
    ipc.done();
    assert!(executor.wait_exit(SOON).success());
}

#[test]
fn a_fifo_request_does_not_stop_sigterm() {
    let ipc = IpcRoot::new();
    let pipe = ipc.root.path().join("pipe");
    mkfifo(&pipe);
    std::os::unix::fs::symlink(&pipe, ipc.tools().join("exec-request-linked.json")).unwrap();
    // The first sweep (which meets the FIFO) always comes before the server looks at its stop signal.
    let mut executor = ipc.executor(&[]);
    assert!(executor.stop_with(Signal::SIGTERM, SOON).0.success());
}

/// A symlink to /dev/zero and a 10 GiB sparse file: before, the server read them whole (again at every rescan)
/// until memory ran out. Now each gets one error result, having read at most 1 MiB.
#[test]
fn endless_and_huge_requests_get_one_error_result_each() {
    let ipc = IpcRoot::new();
    let executor = ipc.capped_executor();
    std::os::unix::fs::symlink("/dev/zero", ipc.tools().join("exec-request-zero.json")).unwrap();
    let sparse = std::fs::File::create(ipc.tools().join("exec-request-sparse.json")).unwrap();
    sparse.set_len(10 << 30).unwrap();
    // One byte over the limit, in a regular file: the limit is the HTTP body's. Moved into place whole: written in
    // place, a prefix of it is a complete request followed by some of the padding (valid JSON, under the limit),
    // which the server may read and run before the write ends (it did, now and then, on a loaded machine).
    let mut over = json!({"command": "true"}).to_string().into_bytes();
    over.resize(protocol::MAX_BODY_BYTES + 1, b' ');
    let staging = ipc.root.path().join("over.json");
    std::fs::write(&staging, over).unwrap();
    std::fs::rename(&staging, ipc.tools().join("exec-request-over.json")).unwrap();
    assert!(refused(&ipc, "zero").contains("is a symbolic link"));
    assert!(refused(&ipc, "sparse").contains("larger than 1048576 bytes"));
    assert!(refused(&ipc, "over").contains("larger than 1048576 bytes"));

    // Another look at the same files (a write wakes the transport): they are not read or answered again.
    let answered = |id: &str| std::fs::metadata(ipc.result_path(id)).unwrap().modified().unwrap();
    let before = answered("sparse");
    sparse.set_len(11 << 30).unwrap();
    ipc.request("ok", &json!({"command": "echo fine"}));
    assert_eq!(ipc.result("ok")["stdout"], "fine\n");
    assert_eq!(answered("sparse"), before, "answered twice");
    let peak = peak_rss(executor.pid());
    assert!(peak < SMALL_RSS, "peak RSS {} MiB", peak >> 20);
}

/// Ids as long as a request name allows (255 bytes in all: ids up to 237 bytes): before, the temporary result name
/// was 22 bytes longer than the id and could not be created, so the command ran and no result came.
#[test]
fn the_longest_ids_get_their_result() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    for len in [233, 234, 237] {
        let id = "i".repeat(len);
        ipc.request(&id, &json!({"command": format!("echo {len}")}));
        assert_eq!(ipc.result(&id)["stdout"], format!("{len}\n"));
    }
}

/// A symlink planted where the old temporary result name was: before, the server wrote the result through it into
/// the file it points to.
#[test]
fn a_planted_temporary_symlink_is_not_written_through() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    let canary = ipc.root.path().join("canary");
    std::fs::write(&canary, "canary\n").unwrap();
    std::os::unix::fs::symlink(&canary, ipc.tools().join(".exec-result-p.json.tmp")).unwrap();
    ipc.request("p", &json!({"command": "echo result"}));
    let result = ipc.result("p");
    assert_eq!(result["stdout"], "result\n");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary\n");
    assert!(std::fs::symlink_metadata(ipc.result_path("p")).unwrap().is_file());
}

/// A writer slower than the quiet period in all, but never silent for that long: judged by its last change, not by
/// when the file was first seen, so it runs once complete (before, it was refused 2 s after first sight).
#[test]
fn a_request_written_slowly_runs_once_complete() {
    let ipc = IpcRoot::new();
    let _executor = ipc.executor(&[]);
    let path = ipc.tools().join("exec-request-slow.json");
    let full = json!({"command": "echo slow"}).to_string();
    std::fs::write(&path, "").unwrap();
    // Ten pieces 0.3 s apart: 3 s in all, each change well within the 2 s a writer may stay silent.
    let pieces = 10;
    for piece in 1..=pieces {
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(&path, &full[..full.len() * piece / pieces]).unwrap();
    }
    let result = ipc.result("slow");
    assert_eq!((result["exitCode"].as_i64(), result["stdout"].as_str()), (Some(0), Some("slow\n")), "{result}");
}

/// Where inotify cannot be had (a node whose inotify instances are used up): before, exec-server refused to start and
/// no tool call was answered. Now it says so and polls the folder as often as the shell executor does: requests are
/// answered, a half-written one runs once complete, and `done` still ends the run.
#[test]
fn without_inotify_the_folder_is_polled() {
    let ipc = IpcRoot::new();
    let mut executor = ipc.executor_without_inotify();
    executor.wait_for_line("the fallback warning", |line| {
        line.contains("inotify") && line.contains("looking at the folders every 0.2 s instead")
    });
    ipc.request("1", &json!({"command": "echo polled"}));
    assert_eq!(ipc.result("1")["stdout"], "polled\n");
    let path = ipc.tools().join("exec-request-2.json");
    std::fs::write(&path, r#"{"command": "echo ran >> count; "#).unwrap();
    // Looked at by a poll or more while half-written (0.2 s apart), then completed.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&path, r#"{"command": "echo ran >> count; cat count"}"#).unwrap();
    assert_eq!(ipc.result("2")["stdout"], "ran\n");
    ipc.done();
    assert!(executor.wait_exit(SOON).success());
}
