//! The baseline of bench/ab-argv.sh: sidecar-exec's command line parsed by hand, as it was before clap derive (a
//! `match` on the first argument), into the same [`Action`] the shipped program performs, so that the A/B measures
//! only what clap costs: start-up and binary size. Built with `--features ab-hand`; never shipped.

use std::ffi::OsString;
use std::path::PathBuf;

use sidecar_exec::argv::UsageError;
use sidecar_exec::sidecar::program::{self, Action};
use sidecar_exec::wrappers::backends::Client;
use sidecar_exec::wrappers::program::install_wrappers;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let attach = UsageError::Arguments { option: "--attach", rule: "takes a runtime and a run id" };
    let action = match args.first().and_then(|a| a.to_str()) {
        Some("-h" | "--help") => {
            println!("{}", program::USAGE);
            std::process::exit(0)
        }
        Some("-V" | "--version") => {
            println!("sidecar-exec {}", env!("CARGO_PKG_VERSION"));
            std::process::exit(0)
        }
        Some("--status") => Ok(Action::Status),
        Some("--runs") => Ok(Action::Runs),
        Some("--attach") => match (args.get(1).and_then(|a| a.to_str()), args.get(2).and_then(|a| a.to_str())) {
            (Some(runtime), Some(id)) if args.len() == 3 => {
                Ok(Action::Attach { runtime: runtime.to_owned(), id: id.to_owned() })
            }
            _ => Err(attach),
        },
        Some("--install-wrappers") => Ok(Action::InstallWrappers(args.get(1).map(PathBuf::from))),
        Some("--explain") => forward(&args[1..], true),
        Some(option) if option.starts_with('-') => Err(UsageError::UnknownOption(option.to_owned())),
        _ => forward(&args, false),
    };
    std::process::exit(match action {
        Ok(action) => program::perform(action, |dir| install_wrappers(Client::SidecarExec, dir)),
        Err(mistake) => program::usage(mistake),
    });
}

/// `RUNTIME COMMAND…` (after `--explain` when `explain`).
fn forward(words: &[OsString], explain: bool) -> Result<Action, UsageError> {
    match words {
        [] => Err(UsageError::Missing("runtime and command")),
        [_] => Err(UsageError::Missing("command after the runtime")),
        [runtime, command @ ..] => Ok(Action::Forward { runtime: runtime.clone(), command: command.to_vec(), explain }),
    }
}
