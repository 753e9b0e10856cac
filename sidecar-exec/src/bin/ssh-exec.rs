//! ssh-exec: runs a command on a host over OpenSSH as if it ran here. See `ssh-exec --help`.

fn main() {
    std::process::exit(sidecar_exec::ssh::program::main(std::env::args_os().skip(1).collect()));
}
