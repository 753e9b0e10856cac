//! The clap side of bench/ab-argv.sh: sidecar-exec's command line parsed by clap derive instead of by hand
//! (`sidecar_exec::argv` and the `match` in `sidecar::program::main`), for the same surface and into the same actions, so that the A/B
//! measures only what clap costs: start-up and binary size. Built with `--features ab-clap`; never shipped.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

/// The shipped program's own functions: everything but the parsing is the same code.
use sidecar_exec::sidecar::program as shipped;

/// runs a command in a build sidecar (a builder container sharing this workspace) and reproduces its stdout,
/// stderr and exit code exactly
#[derive(Parser)]
#[command(name = "sidecar-exec", version)]
struct Cli {
    /// each configured sidecar, its URL, whether /health answers, and its /info
    #[arg(long, exclusive = true)]
    status: bool,
    /// write a wrapper into DIR for each command of the configured sidecars
    #[arg(long, value_name = "DIR", exclusive = true)]
    install_wrappers: Option<Option<PathBuf>>,
    /// <runtime> <command> [args…]: everything after <runtime> is the command's own, flags included
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "RUNTIME COMMAND")]
    argv: Vec<OsString>,
}

fn main() {
    let cli = Cli::parse();
    let code = if cli.status {
        shipped::status()
    } else if let Some(dir) = cli.install_wrappers {
        shipped::install_wrappers(dir)
    } else if cli.argv.len() < 2 {
        shipped::usage(sidecar_exec::argv::UsageError::Missing("runtime or command"))
    } else {
        shipped::run(&cli.argv)
    };
    std::process::exit(code);
}
