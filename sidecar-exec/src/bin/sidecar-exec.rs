//! sidecar-exec: runs a command in a build sidecar as if it ran here. See `sidecar-exec --help`. Called through a
//! wrapper link (`npm` → sidecar-exec), its name is the command ([`sidecar_exec::wrappers::called_as`]).

use sidecar_exec::sidecar::program::{self, Action};
use sidecar_exec::wrappers::{backends::Client, called_as, program::install_wrappers};

fn main() {
    let argv: Vec<_> = std::env::args_os().collect();
    let install = |dir| install_wrappers(Client::SidecarExec, dir);
    let code = match called_as::wrapped_command(&argv) {
        // A wrapper link: every argument is the command's, nothing to parse.
        Some((runtime, command)) => program::perform(Action::Forward { runtime, command, explain: false }, install),
        // A direct call: its arguments are its own (no link put anything before them).
        None => program::main(argv.into_iter().skip(1).collect(), install),
    };
    std::process::exit(code);
}
