//! ssh-exec: runs a command on a host over OpenSSH as if it ran here. See `ssh-exec --help`. Called through a
//! wrapper link (`gofmt`, `host-run` → ssh-exec), its name is the command ([`sidecar_exec::wrappers::called_as`]).

use sidecar_exec::wrappers::{backends::Client, called_as, program::install_wrappers};

fn main() {
    let args = called_as::arguments(Client::SshExec, std::env::args_os());
    let install = |dir| install_wrappers(Client::SshExec, dir);
    std::process::exit(sidecar_exec::ssh::program::main(args, install));
}
