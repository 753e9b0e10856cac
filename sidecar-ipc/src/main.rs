//! The sidecar-ipc binary: the command line and a one-thread runtime; everything else is in the library.

use clap::Parser;
use sidecar_ipc::cli::Cli;
use sidecar_ipc::exit::ExitError;
use sidecar_ipc::ipc::Ipc;

fn main() {
    let cli = Cli::parse();
    let ipc = Ipc::new(cli.ipc_root);
    // One thread: every subcommand waits on files, one child or one HTTP call at a time.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => std::process::exit(ExitError::failed(format!("cannot start the async runtime: {err}")).report()),
    };
    let code = runtime.block_on(sidecar_ipc::execute(&ipc, cli.command));
    std::process::exit(code);
}
