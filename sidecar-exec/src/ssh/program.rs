//! The `ssh-exec` program: options, one call prepared from the environment, and how it ends.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::argv::{Parsed, UsageError};
use crate::config_error::ConfigError;
use crate::exit::{ClientExit, EXIT_BROKEN_PIPE, EXIT_CONFIG};
use crate::installer::Installer;
use crate::interrupt::InterruptHandlers;
use crate::ssh::command::Route;
use crate::ssh::config_error::SshConfigError;
use crate::ssh::mux::{self, MasterError, NoFolder};
use crate::ssh::script::{self, Nonce, ScriptBody, ShellSetup};
use crate::ssh::session::{self, Launch, SessionEnd, StdinRoute};
use crate::ssh::settings::{self, SshSettings};
use crate::ssh::{auto, key, transport};
use crate::terminal_guard;
use crate::{argv, signal_death};

pub const USAGE: &str = "usage: ssh-exec [--] <command> [args…]
       ssh-exec --check
       ssh-exec --probe <command>…
       ssh-exec --auto-run <command> [args…]
       ssh-exec --install-wrappers [DIR]";

/// The connection failed (or was lost): a `ssh-exec:` line saying which and what to fix. A command that itself exits
/// 255 also gives 255, without a line.
pub const EXIT_TRANSPORT: i32 = 255;

// The options are modes, without variable twins: the settings are the SSH_* variables `--help` lists.
/// Runs a command on a host over OpenSSH (your keys, agent, ~/.ssh/config and known_hosts), in the host folder
/// that corresponds to the current directory, with its stdout, stderr and exit code as if it ran here.
/// Everything after the options is the command's own, flags included.
#[derive(Debug, clap::Parser)]
#[command(name = "ssh-exec", version, verbatim_doc_comment, override_usage = crate::argv::clap_usage(USAGE))]
pub struct Options {
    /// Connect, enter the host folder of the current directory, print `ok`
    #[arg(long, conflicts_with_all = ["probe", "auto_run"])]
    check: bool,
    /// Print the given commands the host has (one per line)
    #[arg(long, conflicts_with = "auto_run")]
    probe: bool,
    /// Run here when this machine can execute the file (an ELF for this CPU or a #!
    /// script), else on the host (e.g. a Mach-O binary a macOS host built)
    #[arg(long, verbatim_doc_comment)]
    auto_run: bool,
    /// Write the wrappers into DIR (default /opt/sidecar/wrappers) as sidecar-exec
    /// --install-wrappers does: for an agent image that has only ssh-exec
    #[arg(long, value_name = "DIR", exclusive = true, verbatim_doc_comment)]
    install_wrappers: Option<Option<PathBuf>>,
    /// The command and its arguments (for --probe: the commands to look for)
    #[arg(trailing_var_arg = true, value_name = "COMMAND ARGS")]
    words: Vec<OsString>,
}

/// What `--help` says after the options: exit codes and every variable.
fn after_help() -> String {
    let mut text =
        "Exit codes: the command's own; 128+N when it died of signal N; 1 for usage or configuration errors and 255
when the connection failed or was lost, each with an `ssh-exec:` line (a command that exits 255 itself gives 255
with no line); 127/126 with a line naming it when the command is not found or cannot be run. SIGINT, SIGTERM and
SIGHUP sent to ssh-exec reach the command's process group on the host as the same signal, and ssh-exec exits with
its code (130/143/129 if it dies of them). 141 when our stdout closes early (`| head -1`), quietly: the command's
group is stopped (TERM, then KILL after SSH_STOP_GRACE).

stdin is forwarded (streamed by ssh; SSH_STDIN=0: not). At a terminal (stdin and stdout both terminals) the command
gets one on the host (ssh -tt; SSH_TTY=0/1 forces it), and the terminal is restored however the call ends.

Environment:
"
        .to_owned();
    for (name, meaning) in settings::VARIABLES {
        text.push_str(&format!("  {name:<22} {meaning}\n"));
    }
    text
}

/// What a call runs.
enum CallKind {
    Command(Vec<OsString>),
    Check,
    Probe(Vec<OsString>),
}

/// ssh-exec's main: the exit code for `args` (without the program name); `--install-wrappers` runs `install`.
pub fn main(args: Vec<OsString>, install: Installer) -> i32 {
    let options = match argv::parse::<Options>("ssh-exec", args, &[], after_help) {
        Ok(Parsed::Options(options)) => options,
        Ok(Parsed::Shown) => return 0,
        Err(mistake) => return usage(mistake),
    };
    let Options { check, probe, auto_run: auto, install_wrappers, words } = options;
    if let Some(dir) = install_wrappers {
        return install(dir);
    }
    match (check, probe, auto, words.is_empty()) {
        (true, _, _, true) => call(CallKind::Check),
        (true, _, _, false) => usage(UsageError::Arguments { option: "--check", rule: "takes no arguments" }),
        (_, true, _, false) => call(CallKind::Probe(words)),
        (_, true, _, true) => {
            usage(UsageError::Arguments { option: "--probe", rule: "needs the names of the commands to look for" })
        }
        (_, _, true, false) => auto_run(&words),
        (_, _, true, true) => usage(UsageError::Arguments { option: "--auto-run", rule: "needs a command" }),
        (false, false, false, true) => usage(UsageError::Missing("command")),
        (false, false, false, false) => call(CallKind::Command(words)),
    }
}

fn usage(mistake: UsageError) -> i32 {
    config_mistake(mistake.into())
}

/// A mistake found before connecting: its line, [`EXIT_CONFIG`].
fn config_mistake(mistake: ConfigError<SshConfigError>) -> i32 {
    mistake.report("ssh-exec", USAGE)
}

/// `--auto-run`: exec the file here when it runs here, else run the command on the host.
fn auto_run(args: &[OsString]) -> i32 {
    let Some(command) = args[0].to_str() else {
        return usage(UsageError::NotUtf8 { position: 1, arg: args[0].clone() });
    };
    match auto::place(command, &std::env::var("PATH").unwrap_or_default()) {
        auto::PanicPlace::Local(file) => {
            let err = std::process::Command::new(&file).arg0(&args[0]).args(&args[1..]).exec();
            eprintln!("ssh-exec: cannot run {} here: {err}", file.display());
            126
        }
        auto::PanicPlace::Host => call(CallKind::Command(args.to_vec())),
    }
}

/// One call prepared: everything decided before anything connects.
struct PreparedCall {
    settings: SshSettings,
    key: Option<PathBuf>,
    folder: Option<PathBuf>,
    nonce: Nonce,
    script: String,
    host_cwd: Option<String>,
    stdin: StdinRoute,
    /// The command runs on a terminal on the host (`ssh -tt`).
    tty: bool,
}

fn prepare(mode: &CallKind) -> Result<PreparedCall, ConfigError<SshConfigError>> {
    let settings = SshSettings::from_env()?;
    let words = match mode {
        CallKind::Command(args) | CallKind::Probe(args) => argv::command_args(args)?,
        CallKind::Check => Vec::new(),
    };
    let host_cwd = match mode {
        CallKind::Probe(_) => None,
        CallKind::Command(_) | CallKind::Check => {
            let cwd = std::env::current_dir().map_err(SshConfigError::CwdUnreadable)?;
            let cwd = cwd.into_os_string().into_string().map_err(SshConfigError::CwdNotUtf8)?;
            Some(match &settings.mapping {
                Some(mapping) => mapping.cwd(&cwd)?,
                None => cwd,
            })
        }
    };
    let words: Vec<String> = match (&settings.mapping, mode) {
        (Some(mapping), CallKind::Command(_)) => words.iter().map(|word| mapping.arg(word)).collect(),
        _ => words,
    };
    let folder = match mux::private_dir() {
        Ok(folder) => Some(folder),
        Err(NoFolder::Unavailable) => None,
        Err(unsafe_folder @ NoFolder::Unsafe { .. }) => {
            eprintln!("ssh-exec: {unsafe_folder}");
            None
        }
    };
    if let Some(folder) = &folder {
        key::remove_stale_copies(folder);
    }
    let key = settings.key.as_deref().map(|key| key::usable(key, folder.as_deref())).transpose()?;
    let nonce = Nonce::new();
    let call = ShellSetup {
        nonce: &nonce,
        cwd: host_cwd.as_deref(),
        env: &settings.env,
        path_prefix: settings.host_path.as_deref(),
        login_shell: settings.login_shell,
    };
    let body = match mode {
        CallKind::Command(_) => ScriptBody::Command(&words),
        CallKind::Check => ScriptBody::Check,
        CallKind::Probe(_) => ScriptBody::Probe(&words),
    };
    let script = script::script(&call, body);
    if script.len() > script::MAX_SCRIPT_BYTES {
        return Err(SshConfigError::ScriptTooLarge { bytes: script.len() }.into());
    }
    let tty = matches!(mode, CallKind::Command(_)) && crate::at_a_terminal::wanted(settings.tty);
    let stdin = match (tty, settings.forward_stdin && matches!(mode, CallKind::Command(_))) {
        (true, _) => StdinRoute::Inherit,
        (false, false) => StdinRoute::Null,
        (false, true) if std::io::stdin().is_terminal() => StdinRoute::Terminal,
        (false, true) => StdinRoute::Inherit,
    };
    Ok(PreparedCall { settings, key, folder, nonce, script, host_cwd, stdin, tty })
}

fn call(mode: CallKind) -> i32 {
    let prepared = match prepare(&mode) {
        Ok(prepared) => prepared,
        Err(mistake) => return config_mistake(mistake),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread runtime");
    let terminal = prepared.tty.then(terminal_guard::Restore::save);
    let (exit, died_of) = runtime.block_on(execute(&prepared));
    drop(terminal);
    let check_passed = matches!(mode, CallKind::Check) && exit.code == 0;
    let code = exit.report("ssh-exec");
    if check_passed {
        println!("ok");
    }
    signal_death::die_like(code, died_of);
    code
}

/// How the call ends, and the signal the command died of when that is known ([`signal_death`]): one we delivered,
/// with the command's status 128 + it.
async fn execute(prepared: &PreparedCall) -> (ClientExit, Option<i32>) {
    match session_end(prepared).await {
        Ok(SessionEnd::Exited { code, delivered }) => {
            (ClientExit::code(code), delivered.map(|interrupt| interrupt.signal() as i32))
        }
        Ok(end) => (ended(prepared, end), None),
        Err(exit) => (exit, None),
    }
}

/// The session's end; `Err` when the call ended before one ran.
async fn session_end(prepared: &PreparedCall) -> Result<SessionEnd, ClientExit> {
    let Ok(mut interrupts) = InterruptHandlers::install() else {
        return Err(ClientExit::fail("cannot install signal handlers"));
    };
    let settings = &prepared.settings;
    let key = prepared.key.as_deref();
    let socket = match &prepared.folder {
        Some(folder) if settings.control_persist > 0 => mux::socket_for(folder, settings, key),
        _ => None,
    };
    let route = match socket {
        None => Route::Direct,
        Some(socket) => {
            tokio::select! {
                started = mux::ensure_master(settings, key, &socket) => match started {
                    Ok(()) => Route::Shared(socket),
                    Err(MasterError::Transport(said)) => return Err(not_started(prepared, Some(EXIT_TRANSPORT), &said)),
                    Err(MasterError::Unavailable) => Route::Direct,
                },
                interrupt = interrupts.recv() => return Err(ClientExit::code(interrupt.code())),
            }
        }
    };
    let _slot = match &route {
        Route::Shared(socket) => tokio::select! {
            slot = mux::session_slot(socket, settings.max_sessions) => slot,
            interrupt = interrupts.recv() => return Err(ClientExit::code(interrupt.code())),
        },
        Route::Direct => None,
    };
    let mut launch = Launch {
        settings,
        key,
        route: &route,
        nonce: &prepared.nonce,
        script: &prepared.script,
        stdin: prepared.stdin,
        tty: prepared.tty,
    };
    let mut outcome = session::run(&launch, &mut interrupts).await;
    if let (SessionEnd::NotStarted(_, said), Route::Shared(_)) = (&outcome, &route) {
        if shared_connection_failed(said) {
            // The master refused the session (or vanished): the command never started, so once more on a
            // connection of its own.
            launch.route = &Route::Direct;
            outcome = session::run(&launch, &mut interrupts).await;
        }
    }
    Ok(outcome)
}

/// What a session's end gives.
fn ended(prepared: &PreparedCall, outcome: SessionEnd) -> ClientExit {
    let settings = &prepared.settings;
    match outcome {
        SessionEnd::Exited { code, .. } => ClientExit::code(code),
        SessionEnd::NoCwd => ClientExit::with_line(
            EXIT_CONFIG,
            format!(
                "the host directory {} does not exist on {} or cannot be entered{}",
                prepared.host_cwd.as_deref().unwrap_or("?"),
                settings.host,
                if settings.mapping.is_some() {
                    " (is SSH_HOST_CWD the workspace's folder on the host?)"
                } else {
                    " (set SSH_HOST_CWD to the workspace's folder on the host)"
                }
            ),
        ),
        SessionEnd::Interrupted(interrupt, why) => ClientExit::interrupted(
            interrupt,
            why.map(|why| format!("interrupted, but the command on the host may not be stopped: {why}")),
        ),
        SessionEnd::BrokenPipe => ClientExit::code(EXIT_BROKEN_PIPE),
        SessionEnd::Lost(status) => {
            ClientExit { code: EXIT_TRANSPORT, message: Some(transport::lost(settings, status)) }
        }
        SessionEnd::NotStarted(status, said) => not_started(prepared, status, &said),
    }
}

fn not_started(prepared: &PreparedCall, status: Option<i32>, said: &str) -> ClientExit {
    let key = prepared.settings.key.as_ref().map(|key| key.display().to_string());
    ClientExit {
        code: EXIT_TRANSPORT,
        message: Some(transport::not_started(&prepared.settings, key.as_deref(), said, status)),
    }
}

/// ssh's words for a multiplexing failure (the master refused or lost the session before the command started).
fn shared_connection_failed(said: &str) -> bool {
    ["mux_client", "control socket", "controlsocket", "session open refused", "master"]
        .iter()
        .any(|needle| said.to_ascii_lowercase().contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Result<Options, UsageError> {
        match argv::parse::<Options>("ssh-exec", args.iter().map(OsString::from).collect(), &[], after_help)? {
            Parsed::Options(options) => Ok(options),
            Parsed::Shown => panic!("{args:?} printed help"),
        }
    }

    #[test]
    fn options_come_first_and_the_rest_is_the_commands() {
        let words = |args: &[&str]| options(args).unwrap().words;
        assert_eq!(words(&["ls", "-la", "--check"]), ["ls", "-la", "--check"]);
        assert_eq!(words(&["--", "-x"]), ["-x"]);
        let auto = options(&["--auto-run", "./app", "--probe"]).unwrap();
        assert!(auto.auto_run && !auto.probe && auto.words == ["./app", "--probe"]);
        assert!(options(&["--check"]).unwrap().check);
        assert_eq!(options(&["-x"]).unwrap_err(), UsageError::UnknownOption("-x".into()));
        assert!(matches!(options(&["--check", "--probe"]), Err(UsageError::Rejected(_))));
    }
}
