//! sidecar-exec: runs a command in a build sidecar as if it ran here. See `sidecar-exec --help`. Called through a
//! wrapper link (`npm` → sidecar-exec), its name is the command ([`sidecar_exec::wrappers::called_as`]).

use sidecar_exec::wrappers::{backends::Client, called_as, program::install_wrappers};

fn main() {
    let args = called_as::arguments(Client::SidecarExec, std::env::args_os());
    let install = |dir| install_wrappers(Client::SidecarExec, dir);
    std::process::exit(sidecar_exec::sidecar::program::main(args, install));
}
