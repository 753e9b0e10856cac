//! sidecar-exec: runs a command in a build sidecar as if it ran here. See `sidecar-exec --help`.

fn main() {
    std::process::exit(sidecar_exec::sidecar::program::main(std::env::args_os().skip(1).collect()));
}
