//! The `sidecar-exec` program: its command line, one call prepared from the environment, and how it ends.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config_error::ConfigError;
use crate::exit::ClientExit;
use crate::interrupt::Interrupts;
use crate::sidecar::resume::Run;
use crate::sidecar::settings::{self, CallSettings};
use crate::sidecar::sidecars::{self, Sidecars, Target};
use crate::sidecar::{forward, request, run_id, runs, status};
use crate::{argv, stdin, wrappers};

pub const USAGE: &str = "usage: sidecar-exec <runtime> <command> [args…]
       sidecar-exec --status
       sidecar-exec --runs
       sidecar-exec --attach <runtime> <run-id>
       sidecar-exec --install-wrappers [DIR]";

fn help() -> String {
    let mut text = format!(
        "sidecar-exec {}: runs a command in a build sidecar (a builder container sharing this workspace) and
reproduces its stdout, stderr and exit code exactly.

{USAGE}

Everything after <runtime> is the command's own: `sidecar-exec node npm -v` runs `npm -v`.

  --status                   each configured sidecar, its URL, whether /health answers, and its /info;
                             exit 1 unless every sidecar is healthy and accepts the token
  --runs                     each configured sidecar's runs (running, and ended ones it still keeps):
                             id, state, exit code, bytes so far, clients attached, age, command
  --attach <runtime> <id>    print run <id>'s output (all it kept), follow it to its end and exit with
                             its code; Ctrl-C cancels it, as for a command started here
  --install-wrappers [DIR]   write a #!/bin/sh wrapper into DIR (default {}) for each command that is
                             not already on PATH outside DIR: to its runtime's sidecar in BUILD_SIDECARS,
                             else to the SSH host when SSH_HOST is set (ssh-exec; also SSH_COMMANDS,
                             host-run and auto-run); remove stale ones
  -h, --help / -V, --version

Exit codes: the command's own; 128+N when it died of signal N; 124 when it timed out; 255 when the sidecar
could not start it; 1 for configuration or transport errors, or for a reported code no process can have
(outside 0..255), always with a `sidecar-exec:` line on stderr;
130/143/129 when interrupted here by SIGINT/SIGTERM/SIGHUP (the remote command is cancelled too).

Resume: every run is named (SIDECAR_RESUME=0: not), so a lost connection does not end the command: the client
reconnects and continues exactly where its output stopped, nothing doubled or missing. If it cannot reconnect
within the sidecar's reattach window, the sidecar stops the command and the client exits 1 saying so.

Environment:
",
        env!("CARGO_PKG_VERSION"),
        wrappers::DEFAULT_DIR
    );
    for (name, meaning) in settings::VARIABLES {
        text.push_str(&format!("  {name:<24} {meaning}\n"));
    }
    text
}

/// sidecar-exec's main: the exit code for `args` (without the program name).
pub fn main(args: Vec<OsString>) -> i32 {
    match args.first().and_then(|a| a.to_str()) {
        Some("-h" | "--help") => {
            print!("{}", help());
            0
        }
        Some("-V" | "--version") => {
            println!("sidecar-exec {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("--status") => status(),
        Some("--runs") => list_runs(),
        Some("--attach") => match (args.get(1).and_then(|a| a.to_str()), args.get(2).and_then(|a| a.to_str())) {
            (Some(runtime), Some(id)) if args.len() == 3 => attach(runtime, id),
            _ => fail(&format!("--attach takes a runtime and a run id\n{USAGE}")),
        },
        Some("--install-wrappers") => install_wrappers(args.get(1).map(PathBuf::from)),
        Some(option) if option.starts_with('-') => fail(&format!("unknown option {option}\n{USAGE}")),
        None => fail(&format!("missing runtime and command\n{USAGE}")),
        Some(_) if args.len() < 2 => fail(&format!("missing command after the runtime\n{USAGE}")),
        Some(_) => run(&args),
    }
}

pub fn fail(message: &str) -> i32 {
    eprintln!("sidecar-exec: {message}");
    1
}

fn runtime() -> tokio::runtime::Runtime {
    // One thread: this process lives for one request, and every wrapped call pays its start-up.
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread runtime")
}

pub fn run(args: &[OsString]) -> i32 {
    let runtime_name = args[0].to_string_lossy().into_owned();
    let cmd = match argv::command_args(&args[1..]) {
        Ok(cmd) => cmd,
        Err(message) => return fail(&message),
    };
    let prepared = (|| {
        let target = Sidecars::from_env()?.target(&runtime_name)?;
        let settings = CallSettings::from_env()?;
        let stdin = stdin::read(settings.forward_stdin_pipe)?;
        let run_id = if settings.resume {
            Some(run_id::new_run_id().map_err(|err| {
                ConfigError(format!(
                    "cannot read /dev/urandom to name the run ({err}); set SIDECAR_RESUME=0 to run without a name"
                ))
            })?)
        } else {
            None
        };
        let request = protocol::ExecRequest {
            cmd,
            cwd: Some(settings.cwd.clone()),
            timeout: Some(i64::try_from(settings.timeout_secs).unwrap_or(i64::MAX)),
            env: Some(settings.env.clone()),
            stdin: None,
            // Always base64: 4 bytes for 3 whatever stdin holds, so the limit is one stated number.
            stdin_b64: stdin.bytes.as_deref().map(protocol::text::to_base64),
            run_id: run_id.clone(),
            idle_timeout: settings.idle_timeout_secs.map(|secs| i64::try_from(secs).unwrap_or(i64::MAX)),
            // This client reads `b64` and `output_b64`: binary output comes without its lossy twin.
            b64_only: true,
        };
        let body = request::body(&request)?;
        let run = run_id.map_or_else(Run::unnamed, Run::named);
        Ok::<_, ConfigError>((target, settings, stdin.unread_pipe, body, run))
    })();
    let (target, settings, unread_pipe, body, mut run) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => return fail(&err.0),
    };
    // Asked before forwarding and, if not yet, once after: never waiting, at most one line.
    let unread_data = || unread_pipe && stdin::has_data_now();
    let hinted = unread_data();
    if hinted {
        eprintln!("sidecar-exec: {}", stdin::unread_hint("SIDECAR_STDIN"));
    }
    let exit = runtime().block_on(async {
        let exit = until_interrupted(forward::forward(&target, &settings, body, &mut run)).await;
        release(&target, &run).await;
        exit
    });
    if !hinted && unread_data() {
        eprintln!("sidecar-exec: {}", stdin::unread_hint("SIDECAR_STDIN"));
    }
    if let Some(message) = &exit.message {
        eprintln!("sidecar-exec: {message}");
    }
    exit.code
}

/// Runs `work` until it ends or a stopping signal comes; the signal drops `work`, which closes its connection (an
/// unnamed run is then cancelled by the server) and ends with 128 + the signal.
async fn until_interrupted(work: impl std::future::Future<Output = ClientExit>) -> ClientExit {
    let Ok(mut interrupts) = Interrupts::install() else {
        return ClientExit::fail("cannot install signal handlers");
    };
    tokio::select! {
        exit = work => exit,
        interrupt = interrupts.recv() => ClientExit { code: interrupt.code(), message: None },
    }
}

/// A named run that may still be running when the client stops (a signal, a closed stdout, giving up) is cancelled
/// with `DELETE /runs/{id}`: at once, not when the server's reattach window passes. One that ended with much output,
/// all of it written here, is forgotten the same way (see [`crate::sidecar::resume::FORGET_ABOVE`]).
async fn release(target: &Target, run: &Run) {
    if let (Some(id), true) = (&run.id, run.needs_cancel() || run.should_forget()) {
        runs::delete(target, id).await;
    }
}

fn list_runs() -> i32 {
    let sidecars = match Sidecars::from_env() {
        Ok(sidecars) => sidecars,
        Err(err) => return fail(&err.0),
    };
    if runtime().block_on(runs::list(&sidecars)) {
        0
    } else {
        1
    }
}

fn attach(runtime_name: &str, id: &str) -> i32 {
    let prepared = (|| {
        let target = Sidecars::from_env()?.target(runtime_name)?;
        let settings = CallSettings::from_env()?;
        let id = protocol::RunId::new(id).map_err(|err| ConfigError(format!("{err}")))?;
        Ok::<_, ConfigError>((target, settings.verbose, id))
    })();
    let (target, verbose, id) = match prepared {
        Ok(prepared) => prepared,
        Err(err) => return fail(&err.0),
    };
    let mut run = Run::attach(id);
    let exit = runtime().block_on(async {
        let exit = until_interrupted(runs::attach(&target, &mut run, verbose)).await;
        release(&target, &run).await;
        exit
    });
    if let Some(message) = &exit.message {
        eprintln!("sidecar-exec: {message}");
    }
    exit.code
}

pub fn status() -> i32 {
    let sidecars = match Sidecars::from_env() {
        Ok(sidecars) => sidecars,
        Err(err) => return fail(&err.0),
    };
    if runtime().block_on(status::status(&sidecars)) {
        0
    } else {
        1
    }
}

/// `--install-wrappers [DIR]`: makes DIR hold exactly the wrappers BUILD_SIDECARS and SSH_HOST call for.
///
/// *Decision:* neither BUILD_SIDECARS nor SSH_HOST set (or blank) is not an error: exit 0, no wrappers, stale ones of
/// ours removed, and one line saying so and what to set. The folder follows the configuration, and no backend is a
/// configuration: an agent image's entrypoint runs this at every start, and an agent started without builders must
/// still start (its commands then run locally or not at all). A BUILD_SIDECARS that is set but invalid, or an
/// invalid SSH_COMMANDS, is an error (exit 1).
pub fn install_wrappers(dir: Option<PathBuf>) -> i32 {
    let dir = dir.unwrap_or_else(|| PathBuf::from(wrappers::DEFAULT_DIR));
    let sidecars = match Sidecars::from_env() {
        Ok(sidecars) => Some(sidecars),
        Err(_) if std::env::var("BUILD_SIDECARS").unwrap_or_default().trim().is_empty() => None,
        Err(err) => return fail(&err.0),
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => return fail(&format!("cannot find this program's own path: {err}")),
    };
    let ssh = match wrappers::SshBackend::from_env(&exe) {
        Ok(ssh) => ssh,
        Err(message) => return fail(&message),
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let report = match wrappers::install(&dir, sidecars.as_ref(), ssh.as_ref(), &path, &exe) {
        Ok(report) => report,
        Err(message) => return fail(&message),
    };
    if sidecars.is_none() && ssh.is_none() {
        let removed = if report.removed.is_empty() {
            String::new()
        } else {
            format!(" (removed the stale ones [{}])", report.removed.join(" "))
        };
        eprintln!(
            "sidecar-exec: BUILD_SIDECARS is not set, so no build sidecar is configured: no wrappers in {}{removed}; \
             SSH_HOST is not set either; set BUILD_SIDECARS (e.g. {}) or SSH_HOST and run this again to install them",
            dir.display(),
            sidecars::EXAMPLE
        );
        return 0;
    }
    for runtime in &report.unknown_runtimes {
        eprintln!("sidecar-exec: runtime '{runtime}' in BUILD_SIDECARS has no known commands; no wrappers for it");
    }
    if !report.both.is_empty() {
        eprintln!(
            "sidecar-exec: both BUILD_SIDECARS and SSH_HOST are set: [{}] could use either and get their build \
             sidecar (native > sidecar > SSH); the SSH host takes the other commands",
            report.both.join(" ")
        );
    }
    eprintln!(
        "sidecar-exec: wrappers in {}: sidecar [{}]; ssh [{}]; native, not wrapped [{}]; removed [{}]",
        dir.display(),
        report.sidecar.join(" "),
        report.ssh.join(" "),
        report.native.join(" "),
        report.removed.join(" ")
    );
    0
}
