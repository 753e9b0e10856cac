//! The `sidecar-exec` program: its command line, one call prepared from the environment, and how it ends.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::argv;
use crate::argv::{Parsed, UsageError};
use crate::config_error::ConfigError;
use crate::exit::ClientExit;
use crate::installer::Installer;
use crate::interrupt::InterruptHandlers;
use crate::sidecar::call::resume::OwnedRun;
use crate::sidecar::call::{forward, run_id};
use crate::sidecar::config::settings::{self, CallSettings, OutputMode};
use crate::sidecar::config::sidecars::{Endpoint, Sidecars};
use crate::sidecar::config_error::SidecarConfigError;
use crate::sidecar::modes::{explain, runs, status};
use crate::sidecar::stdin::source::StdinSource;
use crate::sidecar::stdin::{policy as stdin, whole as stdin_body};
use crate::sidecar::tty;
use crate::sidecar::wire::request;
use crate::signal_death;

pub const USAGE: &str = "usage: sidecar-exec [--explain] <runtime> <command> [args…]
       sidecar-exec --status
       sidecar-exec --runs
       sidecar-exec --attach <runtime> <run-id>
       sidecar-exec --install-wrappers [DIR]";

// The options are the program's modes, each alone on the command line. They have no variable twins (the house rule
// for flags): the settings are the contract's variables (`--help` lists them), and an inherited `SIDECAR_STATUS=1`
// must not turn every wrapped call into a status line.
/// Runs a command in a build sidecar (a builder container sharing this workspace) and reproduces its stdout,
/// stderr and exit code exactly. Everything after RUNTIME is the command's own: `sidecar-exec node npm -v`
/// runs `npm -v`.
#[derive(Debug, clap::Parser)]
#[command(name = "sidecar-exec", version, verbatim_doc_comment, override_usage = crate::argv::clap_usage(USAGE))]
pub struct Options {
    /// Each configured sidecar, its URL, whether /health answers, and its /info;
    /// exit 1 unless every sidecar is healthy and accepts the token
    #[arg(long, exclusive = true, verbatim_doc_comment)]
    status: bool,
    /// Each configured sidecar's runs (running, and ended ones it still keeps):
    /// id, state, exit code, bytes so far, clients attached, age, command
    #[arg(long, exclusive = true, verbatim_doc_comment)]
    runs: bool,
    /// Print run RUN_ID's output (all it kept), follow it to its end and exit with
    /// its code; Ctrl-C cancels it, as for a command started here
    #[arg(long, num_args = 2, value_names = ["RUNTIME", "RUN_ID"], exclusive = true, verbatim_doc_comment)]
    attach: Option<Vec<String>>,
    /// Write a wrapper (a link to the client) into DIR (default /opt/sidecar/wrappers)
    /// for each command that is not already on PATH outside DIR: to its runtime's
    /// sidecar in BUILD_SIDECARS when its builder has it, else to the SSH host when
    /// SSH_HOST is set (ssh-exec; also SSH_COMMANDS, host-run and auto-run); remove
    /// stale ones
    #[arg(long, value_name = "DIR", exclusive = true, verbatim_doc_comment)]
    install_wrappers: Option<Option<PathBuf>>,
    /// Show what forwarding RUNTIME COMMAND… would send (the sidecar, the mode, stdin,
    /// the names of the variables; values only for the default allowlist) and run nothing;
    /// SIDECAR_VERBOSE=1 prints the same on stderr before every call
    #[arg(long, verbatim_doc_comment)]
    explain: bool,
    /// The runtime whose sidecar runs the command, then the command and its arguments
    #[arg(trailing_var_arg = true, value_name = "RUNTIME COMMAND ARGS")]
    words: Vec<OsString>,
}

/// What one call of the program does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Forward `command` to `runtime`'s sidecar.
    Forward {
        runtime: OsString,
        command: Vec<OsString>,
        /// `--explain`: show what would be sent instead.
        explain: bool,
    },
    Status,
    Runs,
    Attach {
        runtime: String,
        id: String,
    },
    InstallWrappers(Option<PathBuf>),
}

impl Options {
    /// The action these options ask for.
    pub fn action(self) -> Result<Action, UsageError> {
        let Options { status, runs, attach, install_wrappers, explain, words } = self;
        Ok(match (attach, install_wrappers) {
            _ if status => Action::Status,
            _ if runs => Action::Runs,
            (Some(attach), _) => {
                let [runtime, id] = <[String; 2]>::try_from(attach)
                    .map_err(|_| UsageError::Arguments { option: ATTACH.0, rule: ATTACH.1 })?;
                Action::Attach { runtime, id }
            }
            (None, Some(dir)) => Action::InstallWrappers(dir),
            (None, None) => {
                let mut words = words.into_iter();
                match (words.next(), words.as_slice()) {
                    (None, _) => return Err(UsageError::Missing("runtime and command")),
                    (Some(_), []) => return Err(UsageError::Missing("command after the runtime")),
                    (Some(runtime), _) => Action::Forward { runtime, command: words.collect(), explain },
                }
            }
        })
    }
}

/// What `--attach` takes, for the line a mistake gets.
const ATTACH: (&str, &str) = ("--attach", "takes a runtime and a run id");

/// What `--help` says after the options: exit codes, resume, and every variable.
fn after_help() -> String {
    let mut text = "Exit codes: the command's own; 128+N when it died of signal N; 124 when it timed out (after
SIDECAR_TIMEOUT, 600 s by default); 127 / 126 when the sidecar has no such command / may not run it (the shell's
message); 255 when the sidecar could not start it otherwise; 1 for configuration or transport errors, or for a
reported code no process can have (outside 0..255), always with a `sidecar-exec:` line on stderr; 141 when our stdout
closes early, quietly (the remote command is cancelled).

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are delivered to the remote command as sent, and the client exits with
the command's own code; Ctrl-Z stops the remote command and the client, `fg` continues both. stdin (a pipe, a
file, a heredoc, a terminal) is streamed to the command (SIDECAR_STDIN=0: not).

Resume: every run is named (SIDECAR_RESUME=0: not), so a lost connection does not end the command: the client
reconnects and continues exactly where its output stopped, nothing doubled or missing. If it cannot reconnect
within the sidecar's reattach window, the sidecar stops the command and the client exits 1 saying so (and how much
output arrived); a sidecar restarted under the run is named so. A stream silent for SIDECAR_SILENCE (60 s) is lost,
and reconnecting gives up after as long again: a server that stopped answering ends the call within about 120 s.

Environment:
"
    .to_owned();
    for (name, meaning) in settings::VARIABLES {
        text.push_str(&format!("  {name:<24} {meaning}\n"));
    }
    text
}

/// sidecar-exec's main: the exit code for `args` (without the program name); `--install-wrappers` runs `install`.
pub fn main(args: Vec<OsString>, install: Installer) -> i32 {
    match argv::parse::<Options>("sidecar-exec", args, &[ATTACH], after_help) {
        Ok(Parsed::Options(options)) => match options.action() {
            Ok(action) => perform(action, install),
            Err(mistake) => usage(mistake),
        },
        Ok(Parsed::Shown) => 0,
        Err(mistake) => usage(mistake),
    }
}

/// Does `action`: the exit code. [`Action::InstallWrappers`] runs `install`.
pub fn perform(action: Action, install: Installer) -> i32 {
    match action {
        Action::Forward { runtime, command, explain } => run(&runtime, &command, explain),
        Action::Status => over_sidecars(|sidecars| async move { status::status(&sidecars).await }),
        Action::Runs => over_sidecars(|sidecars| async move { runs::list(&sidecars).await }),
        Action::Attach { runtime, id } => attach(&runtime, &id),
        Action::InstallWrappers(dir) => install(dir),
    }
}

pub fn usage(mistake: UsageError) -> i32 {
    config_mistake(mistake.into())
}

/// A mistake found before anything is sent: its line, [`crate::exit::EXIT_CONFIG`].
fn config_mistake(mistake: ConfigError<SidecarConfigError>) -> i32 {
    mistake.report("sidecar-exec", USAGE)
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    // One thread: this process lives for one request, and every wrapped call pays its start-up.
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread runtime")
}

/// Everything one forwarded call needs, decided before anything is sent.
struct PreparedCall {
    target: Endpoint,
    settings: CallSettings,
    /// stdin is a pipe left unread (see [`stdin_body::Stdin::unread_pipe`]).
    unread_pipe: bool,
    /// What is streamed as stdin ([`StdinSource::Nothing`] when it travels inline or not at all).
    stdin: StdinSource,
    program: String,
    body: Vec<u8>,
    run: OwnedRun,
    /// The command runs on a remote terminal ([`forward::on_terminal`]).
    on_terminal: bool,
}

fn prepare(runtime_name: &str, args: &[OsString]) -> Result<PreparedCall, ConfigError<SidecarConfigError>> {
    let cmd = argv::command_args(args)?;
    let target = Sidecars::from_env()?.target(runtime_name)?;
    let settings = CallSettings::from_env()?;
    let run_id = match settings.resume {
        true => Some(run_id::new_run_id().map_err(|err| ConfigError::Program(SidecarConfigError::NoRunId(err)))?),
        false => None,
    };
    // Streamed stdin needs a named run (input goes to /runs/{id}/stdin) and a streaming mode; otherwise stdin
    // travels as the blocking client does: a regular file inline, a pipe only with SIDECAR_STDIN=1.
    let streams_stdin = run_id.is_some() && settings.mode != OutputMode::Blocking;
    // A terminal needs its keystrokes streamed: not with SIDECAR_STDIN=0 (nor SIDECAR_RESUME=0 or the blocking mode).
    let tty =
        (streams_stdin && settings.stdin_switch != Some(false) && crate::at_a_terminal::wanted(settings.tty_switch))
            .then(tty::request);
    let (stdin, inline) = match (streams_stdin, settings.stdin_switch) {
        (true, Some(false)) => (StdinSource::Nothing, stdin_body::Stdin { bytes: None, unread_pipe: false }),
        (true, _) => (StdinSource::of_stdin(), stdin_body::Stdin { bytes: None, unread_pipe: false }),
        (false, switch) => (StdinSource::Nothing, stdin_body::read(switch == Some(true))?),
    };
    let on_terminal = tty.is_some();
    let request = protocol::ExecRequest {
        cmd,
        cwd: Some(settings.cwd.clone()),
        timeout: Some(i64::try_from(settings.timeout_secs).unwrap_or(i64::MAX)),
        env: Some(settings.env.clone()),
        stdin: None,
        // Always base64: 4 bytes for 3 whatever stdin holds, so the limit is one stated number.
        stdin_b64: inline.bytes.as_deref().map(protocol::text::to_base64),
        run_id: run_id.clone(),
        idle_timeout: settings.idle_timeout_secs.map(|secs| i64::try_from(secs).unwrap_or(i64::MAX)),
        // This client reads `b64` and `output_b64`: binary output comes without its lossy twin.
        b64_only: true,
        // With `tty` as well: a server that streams but has no terminals still streams the keys (to a pipe).
        stdin_stream: stdin.streams() || tty.is_some(),
        tty,
        ..Default::default()
    };
    let body = request::body(&request)?;
    let run = run_id.map_or_else(OwnedRun::unnamed, OwnedRun::named);
    let program = request.cmd.first().cloned().unwrap_or_default();
    Ok(PreparedCall { target, settings, unread_pipe: inline.unread_pipe, stdin, program, body, run, on_terminal })
}

/// `sidecar-exec <runtime> <command> [args…]`; with `explain_only`, what would be sent, on stdout, and nothing
/// is run.
fn run(runtime: &OsString, command: &[OsString], explain_only: bool) -> i32 {
    let runtime_name = runtime.to_string_lossy().into_owned();
    let PreparedCall { target, settings, unread_pipe, stdin, program, body, mut run, on_terminal } =
        match prepare(&runtime_name, command) {
            Ok(prepared) => prepared,
            Err(mistake) => return config_mistake(mistake),
        };
    if explain_only || settings.verbose {
        let text = explain::explain(&target, &settings, stdin, &program);
        if explain_only {
            print!("{text}");
            return 0;
        }
        eprint!("{text}");
    }
    // Asked before forwarding and, if not yet, once after: never waiting, at most one line.
    let unread_data = || unread_pipe && stdin::has_data_now();
    let hinted = unread_data();
    if hinted {
        eprintln!("sidecar-exec: {}", stdin::unread_hint("SIDECAR_STDIN"));
    }
    let call = forward::Call { target: &target, settings: &settings, body, program: &program, stdin };
    let runtime = tokio_runtime();
    let exit = runtime.block_on(async {
        let exit = match settings.mode {
            OutputMode::Blocking => until_interrupted(forward::blocking(&call, &mut run)).await,
            OutputMode::Negotiate | OutputMode::Stream if on_terminal => forward::on_terminal(&call, &mut run).await,
            OutputMode::Negotiate | OutputMode::Stream => forward::streamed(&call, &mut run).await,
        };
        release(&target, &run).await;
        exit
    });
    // The process ends with this call (the binary exits with its code), and nothing left in the runtime has
    // anything to finish: the output is written, the run released, and its only task is the HTTP connection's,
    // whose socket the exit closes. Tearing the runtime down (shutting that task down, freeing the drivers) was
    // ~6% of a forwarded call's client CPU (BENCHMARKS.md, "P1: where a forwarded call's time goes").
    std::mem::forget(runtime);
    if !hinted && unread_data() {
        eprintln!("sidecar-exec: {}", stdin::unread_hint("SIDECAR_STDIN"));
    }
    let code = exit.report("sidecar-exec");
    signal_death::die_like(code, run.died_of);
    code
}

/// Runs `work` until it ends or a stopping signal comes; the signal drops `work`, which closes its connection (an
/// unnamed run is then cancelled by the server) and ends with 128 + the signal.
async fn until_interrupted(work: impl std::future::Future<Output = ClientExit>) -> ClientExit {
    let Ok(mut interrupts) = InterruptHandlers::install() else {
        return ClientExit::fail("cannot install signal handlers");
    };
    tokio::select! {
        exit = work => exit,
        interrupt = interrupts.recv() => ClientExit::interrupted(interrupt, None),
    }
}

/// A named run that may still be running when the client stops (a signal, a closed stdout, giving up) is cancelled
/// with `DELETE /runs/{id}`: at once, not when the server's reattach window passes. One that ended with much output,
/// all of it written here, is forgotten the same way (see [`crate::sidecar::call::resume::FORGET_ABOVE`]).
async fn release(target: &Endpoint, run: &OwnedRun) {
    if let (Some(id), true) = (&run.id, run.needs_cancel() || run.should_forget()) {
        runs::delete(target, id).await;
    }
}

/// `--runs` and `--status`: `report` prints one line per configured sidecar and says whether all of them answered
/// as they should (exit 0, else 1).
fn over_sidecars<F: std::future::Future<Output = bool>>(report: impl FnOnce(Sidecars) -> F) -> i32 {
    let sidecars = match Sidecars::from_env() {
        Ok(sidecars) => sidecars,
        Err(mistake) => return config_mistake(mistake.into()),
    };
    match tokio_runtime().block_on(report(sidecars)) {
        true => 0,
        false => 1,
    }
}

fn attach(runtime_name: &str, id: &str) -> i32 {
    let prepared = || -> Result<_, ConfigError<SidecarConfigError>> {
        let target = Sidecars::from_env()?.target(runtime_name)?;
        let settings = CallSettings::from_env()?;
        Ok((target, settings, protocol::RunId::new(id)?))
    };
    let (target, settings, id) = match prepared() {
        Ok(prepared) => prepared,
        Err(mistake) => return config_mistake(mistake),
    };
    let mut run = OwnedRun::attach(id.clone());
    let exit = tokio_runtime().block_on(async {
        let exit = match runs::attach_mode(&target, &id, settings.patience).await {
            Ok(runs::AttachMode::Output) => until_interrupted(runs::attach(&target, &mut run, &settings)).await,
            Ok(runs::AttachMode::Terminal) => runs::attach_terminal(&target, &mut run, &settings).await,
            Err(refused) => {
                // Refused before following: the run is not this client's to cancel.
                run.live = false;
                refused
            }
        };
        release(&target, &run).await;
        exit
    });
    exit.report("sidecar-exec")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(args: &[&str]) -> Result<Action, UsageError> {
        match argv::parse::<Options>("sidecar-exec", args.iter().map(OsString::from).collect(), &[ATTACH], after_help)?
        {
            Parsed::Options(options) => options.action(),
            Parsed::Shown => panic!("{args:?} printed help"),
        }
    }

    #[test]
    fn everything_after_the_runtime_is_the_commands() {
        let forward = |runtime: &str, command: &[&str]| Action::Forward {
            runtime: runtime.into(),
            command: command.iter().map(OsString::from).collect(),
            explain: false,
        };
        assert_eq!(action(&["node", "npm", "-v"]), Ok(forward("node", &["npm", "-v"])));
        assert_eq!(
            action(&["node", "sh", "--status", "-h", "--"]),
            Ok(forward("node", &["sh", "--status", "-h", "--"]))
        );
        assert_eq!(action(&["--", "node", "npm"]), Ok(forward("node", &["npm"])));
        let explained = Action::Forward { runtime: "node".into(), command: vec!["npm".into()], explain: true };
        assert_eq!(action(&["--explain", "node", "npm"]), Ok(explained));
        assert_eq!(action(&["--status"]), Ok(Action::Status));
        assert_eq!(action(&["--runs"]), Ok(Action::Runs));
        assert_eq!(action(&["--attach", "go", "r1"]), Ok(Action::Attach { runtime: "go".into(), id: "r1".into() }));
        assert_eq!(action(&["--install-wrappers"]), Ok(Action::InstallWrappers(None)));
        assert_eq!(action(&["--install-wrappers", "/w"]), Ok(Action::InstallWrappers(Some("/w".into()))));
    }

    #[test]
    fn each_mistake_is_a_usage_error() {
        assert_eq!(action(&[]), Err(UsageError::Missing("runtime and command")));
        assert_eq!(action(&["python"]), Err(UsageError::Missing("command after the runtime")));
        assert_eq!(action(&["--bogus"]), Err(UsageError::UnknownOption("--bogus".into())));
        let attach = Err(UsageError::Arguments { option: "--attach", rule: "takes a runtime and a run id" });
        assert_eq!(action(&["--attach", "go"]), attach);
        assert!(matches!(action(&["--status", "--runs"]), Err(UsageError::Rejected(_))));
    }
}
