//! The command line both clients forward: everything after the client's own options is the command's, flags
//! included (`sidecar-exec node npm -v` runs `npm -v`, `ssh-exec ls -la` runs `ls -la`).
//!
//! Parsed by hand (here and in the `match` of `sidecar-exec`'s `main`), not by clap: `bench/ab-argv.sh` builds the
//! same surface with clap derive, and it made the static client 12% larger and `--version` 15–27% slower to start
//! (a forwarded call: +1–12% over four runs, within this machine's noise), where a gap under 5% would have meant
//! switching (BENCHMARKS.md, "A/B: argv parsing").

use std::ffi::OsString;

/// The command's argv as text. Each argument must be UTF-8: it travels as JSON to a sidecar, and as shell text
/// (with paths mapped) to an SSH host. `args[0]` is the command, reported as argument 1.
pub fn command_args(args: &[OsString]) -> Result<Vec<String>, String> {
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            arg.to_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("argument {} ({arg:?}) is not valid UTF-8 and cannot be forwarded", index + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn every_argument_is_kept_or_the_bad_one_named() {
        let args = vec![OsString::from("ls"), OsString::from("-la")];
        assert_eq!(command_args(&args).unwrap(), ["ls", "-la"]);
        let args = vec![OsString::from("cat"), OsString::from_vec(vec![0xff])];
        assert!(command_args(&args).unwrap_err().starts_with("argument 2 "));
    }
}
