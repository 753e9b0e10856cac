//! The columns' set-ups: the real installer's wrappers on a PATH where they shadow the native commands (as
//! tests/demo.sh has it), forwarding to an exec-server for the python runtime on 127.0.0.1:0, or to a real sshd on
//! 127.0.0.1; the same workspace folder natively and forwarded; and running every case on both sides, on pipes or
//! on a terminal.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::corpus::{DATA, DATA_MIB, FILES};
use super::harness::{self, At, Case, Side, NATIVE_BOUND, SLOWER_BY};
use super::report::Outcome;
use crate::support::{client_run, stderr, stdout, BinaryRun};

/// How many cases run at once: they are independent (a folder and a process group each), and most of a case is
/// waiting on a process start.
const AT_ONCE: usize = 4;

/// A column ready to run: the workspace (the same folder natively and forwarded), and both sides.
pub struct Sides {
    pub workspace: PathBuf,
    pub native: Side,
    pub forwarded: Side,
}

/// The environment both sides share: this process's own, as the in-process exec-server passes it to its commands,
/// without the clients' settings (a developer's SIDECAR_STREAM=1 would change what is compared).
fn shared_env(path: &OsStr) -> Vec<(OsString, OsString)> {
    let configures_a_client = |name: &str| {
        ["SIDECAR_", "SSH_", "EXEC_SERVER_"].iter().any(|prefix| name.starts_with(prefix))
            || name == protocol::vars::BUILD_SIDECARS
    };
    std::env::vars_os()
        .filter(|(name, _)| name != "PATH" && !configures_a_client(&name.to_string_lossy()))
        .chain([("PATH".into(), path.to_owned())])
        .collect()
}

/// The PATH the builder gives its commands, asked of the builder (`client` runs a command there): native runs
/// get the same, so that both find the same `python3`.
async fn builder_path(client: BinaryRun) -> OsString {
    let output = client.args(["sh", "-c", "printf %s \"$PATH\""]).run().await;
    assert_eq!(output.status.code(), Some(0), "asking the builder for its PATH: {}", stderr(&output));
    stdout(&output).into()
}

/// `sidecar-exec --install-wrappers DIR` as the agent's entrypoint runs it, with `configure` setting the backend,
/// on a PATH with no python at all (as tests/demo.sh does), so that every python command is wrapped.
async fn install_wrappers(scratch: &Path, configure: impl FnOnce(BinaryRun) -> BinaryRun) -> PathBuf {
    let wrappers = scratch.join("wrappers");
    let empty = scratch.join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let output = configure(client_run().env("PATH", &empty))
        .args([OsStr::new("--install-wrappers"), wrappers.as_os_str()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(0), "installing the wrappers: {}", stderr(&output));
    assert!(wrappers.join("python3").is_file(), "no python3 wrapper: {}", stderr(&output));
    wrappers
}

/// Both sides of a column: native on the builder's PATH, forwarded with the wrappers before it and `client_env`
/// (the backend's settings) added.
pub async fn sides(
    workspace: &Path,
    scratch: &Path,
    builder: BinaryRun,
    client_env: Vec<(OsString, OsString)>,
    configure_install: impl FnOnce(BinaryRun) -> BinaryRun,
    not_the_cases: fn(i32) -> bool,
) -> Sides {
    let path = builder_path(builder).await;
    let wrappers = install_wrappers(scratch, configure_install).await;
    let mut wrapped_path = wrappers.into_os_string();
    wrapped_path.push(":");
    wrapped_path.push(&path);
    let native = shared_env(&path);
    let mut forwarded = shared_env(&wrapped_path);
    forwarded.extend(client_env.into_iter().filter(|(name, _)| name != "PATH"));
    write_data(&workspace.join(DATA));
    Sides {
        workspace: workspace.to_owned(),
        native: Side { env: native, not_the_cases },
        forwarded: Side { env: forwarded, not_the_cases },
    }
}

/// The environment a client run is configured with (what `configure` set on it), to hand to `bash`.
pub fn env_of(run: BinaryRun) -> Vec<(OsString, OsString)> {
    let command = run.other("true");
    command.as_std().get_envs().filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned()))).collect()
}

/// The big cases' input: 100 MiB covering every byte value, written 1 MiB at a time (never held whole).
fn write_data(path: &Path) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for piece in 0..DATA_MIB {
        file.write_all(&testkit::random_bytes(1 << 20, 0x5eed + piece as u64)).unwrap();
    }
    file.flush().unwrap();
}

/// Runs every case of `cases` natively, then forwarded (with a hang guard scaled by how long the native run took),
/// in its own folder of the workspace, [`AT_ONCE`] cases at a time (the longest first), `at` pipes or a terminal;
/// returns the outcomes in the order of `cases`.
pub fn run_all(sides: &Sides, cases: &[Case], at: At) -> Vec<Outcome> {
    let mut order: Vec<usize> = (0..cases.len()).collect();
    order.sort_by_key(|index| std::cmp::Reverse(cases[*index].bound));
    let queue = std::sync::Mutex::new(order.into_iter());
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..AT_ONCE {
            scope.spawn(|| loop {
                let Some(index) = queue.lock().unwrap().next() else { break };
                let case = cases[index];
                let dir = sides.workspace.join(case.name);
                let native = harness::run(&case, &sides.native, &dir, FILES, NATIVE_BOUND, at);
                let bound = case.bound + native.took * SLOWER_BY;
                let forwarded = harness::run(&case, &sides.forwarded, &dir, FILES, bound, at);
                let screen = matches!(at, At::Terminal(_));
                done.lock().unwrap().push((index, Outcome { case, native, forwarded, screen }));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, outcome)| outcome).collect()
}
