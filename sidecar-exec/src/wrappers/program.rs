//! `--install-wrappers [DIR]`, the same option in both programs: makes DIR hold exactly the wrappers the
//! configuration calls for and says what it did in one line (two when both backends could serve a runtime).

use std::path::PathBuf;

use crate::exit::ClientExit;
use crate::sidecar::config::sidecars;
use crate::terminal_safe::terminal_safe;
use crate::wrappers::answer::{unlisted_line, Answer};
use crate::wrappers::backends::{Backends, Client};
use crate::wrappers::install::{self, Answers};
use crate::wrappers::{builder_commands, host_commands, DEFAULT_DIR, SSH_TOOLS};

/// Installs the wrappers into `dir` (default [`DEFAULT_DIR`]) as `running`; the exit code.
///
/// *Decision:* neither BUILD_SIDECARS nor SSH_HOST set (or blank) is not an error: exit 0, no wrappers, stale ones of
/// ours removed, and one line saying so and what to set. The folder follows the configuration, and no backend is a
/// configuration: an agent image's entrypoint runs this at every start, and an agent started without builders must
/// still start (its commands then run locally or not at all). A BUILD_SIDECARS that is set but invalid, an invalid
/// SSH_COMMANDS, a backend whose client is not beside this one, or a folder that cannot be written is an error
/// (exit 1).
pub fn install_wrappers(running: Client, dir: Option<PathBuf>) -> i32 {
    let program = running.name();
    let dir = dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => return ClientExit::fail(format!("cannot find this program's own path: {err}")).report(program),
    };
    let backends = match Backends::from_env(running, &exe) {
        Ok(backends) => backends,
        Err(err) => return ClientExit::config(err).report(program),
    };
    let answers = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(ask(&backends));
    let path = std::env::var("PATH").unwrap_or_default();
    let report = match install::install(&dir, &backends, &answers, &path) {
        Ok(report) => report,
        Err(err) => return ClientExit::fail(err.to_string()).report(program),
    };
    if backends.sidecar.is_none() && backends.ssh.is_none() {
        let removed = if report.removed.is_empty() {
            String::new()
        } else {
            format!(" (removed the stale ones [{}])", report.removed.join(" "))
        };
        eprintln!(
            "{program}: BUILD_SIDECARS is not set, so no build sidecar is configured: no wrappers in {}{removed}; \
             SSH_HOST is not set either; set BUILD_SIDECARS (e.g. {}) or SSH_HOST and run this again to install them",
            dir.display(),
            sidecars::EXAMPLE
        );
        return 0;
    }
    for (runtime, answer) in &answers.sidecars {
        if let Answer::Unknown(why) = answer {
            let commands = protocol::commands_for(runtime).unwrap_or_default();
            eprintln!("{}", unlisted_line(program, &format!("the {runtime} sidecar"), why, commands));
        }
    }
    if let (Some(Answer::Unknown(why)), Some(ssh)) = (&answers.host, &backends.ssh) {
        let commands: Vec<&str> =
            report.ssh.iter().map(String::as_str).filter(|command| !SSH_TOOLS.contains(command)).collect();
        let host = format!("the SSH host {}", terminal_safe(&ssh.host));
        eprintln!("{}", unlisted_line(program, &host, why, &commands));
    }
    for runtime in &report.unknown_runtimes {
        eprintln!("{program}: runtime '{runtime}' in BUILD_SIDECARS has no known commands; no wrappers for it");
    }
    if !report.both.is_empty() {
        eprintln!(
            "{program}: both BUILD_SIDECARS and SSH_HOST are set: [{}] could use either and get their build sidecar \
             (native > sidecar > SSH); the SSH host takes the other commands",
            report.both.join(" ")
        );
    }
    eprintln!(
        "{program}: wrappers in {}: sidecar [{}]; ssh [{}]; native, not wrapped [{}]; not on the builder, not wrapped \
         [{}]; not on the host, not wrapped [{}]; removed [{}]",
        dir.display(),
        report.sidecar.join(" "),
        report.ssh.join(" "),
        report.native.join(" "),
        report.missing.join(" "),
        report.missing_on_host.join(" "),
        report.removed.join(" ")
    );
    0
}

/// Asks every configured backend which commands it has, all at once: each sidecar within its bound
/// ([`builder_commands::ASK_WITHIN`]) and the SSH host within its own ([`host_commands::PROBE_WITHIN`]), so the
/// installer waits for the slowest bound, not their sum.
async fn ask(backends: &Backends) -> Answers {
    let sidecars = async {
        match &backends.sidecar {
            Some(sidecar) => builder_commands::ask_all(&sidecar.sidecars).await,
            None => Default::default(),
        }
    };
    let host = async {
        match &backends.ssh {
            Some(ssh) => Some(host_commands::ask(ssh, &install::host_candidates(backends)).await),
            None => None,
        }
    };
    let (sidecars, host) = tokio::join!(sidecars, host);
    Answers { sidecars, host }
}
