//! The command line of both clients: their own options, parsed by clap derive ([`parse`]), then everything after them
//! is the command's, flags included (`sidecar-exec node npm -v` runs `npm -v`, `ssh-exec ls -la` runs `ls -la`);
//! and the mistakes a command line can hold.
//!
//! *Decision:* clap derive, as the house rules ask, not hand-written parsing. The hand-written parser was kept for
//! start-up cost, but what clap costs a forwarded call is under the project's 5% bar (BENCHMARKS.md, "argv parsing";
//! `bench/ab-argv.sh` measures it against the hand-written parser it replaced). clap's own error texts and its exit
//! code 2 are not used: each mistake becomes a [`UsageError`], printed as the program's one line and exit 1, like
//! every other configuration mistake.

use std::ffi::OsString;
use std::fmt;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The usage clap shows (`--help`) from a program's one usage text, written once with the `usage: ` its mistakes
/// print before it ([`UsageError`]'s line and `--help` then cannot disagree).
pub fn clap_usage(usage: &'static str) -> &'static str {
    usage.strip_prefix("usage: ").unwrap_or(usage)
}

/// The command's argv as text. Each argument must be UTF-8: it travels as JSON to a sidecar, and as shell text
/// (with paths mapped) to an SSH host. `args[0]` is the command, reported as argument 1.
pub fn command_args(args: &[OsString]) -> Result<Vec<String>, UsageError> {
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            arg.to_str().map(str::to_owned).ok_or_else(|| UsageError::NotUtf8 { position: index + 1, arg: arg.clone() })
        })
        .collect()
}

/// What parsing a command line gave: something to do, or nothing (help or version, already printed: exit 0).
#[derive(Debug)]
pub enum Parsed<C> {
    Options(C),
    Shown,
}

/// Parses `args` (without the program name) into the program's options `C`. `rules` name the options whose
/// arguments clap checks, with what they take, for the line a mistake gets (`("--attach", "takes a runtime and a
/// run id")`). `after_help` (exit codes, the variables) is built only when help may be shown: it is most of what
/// clap would otherwise add to every forwarded call (BENCHMARKS.md, "argv parsing").
pub fn parse<C: clap::Parser>(
    program: &str,
    args: Vec<OsString>,
    rules: &[(&'static str, &'static str)],
    after_help: fn() -> String,
) -> Result<Parsed<C>, UsageError> {
    let mut command = C::command();
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        command = command.after_help(after_help());
    }
    let parsed = command
        .try_get_matches_from(std::iter::once(OsString::from(program)).chain(args))
        .and_then(|mut matches| C::from_arg_matches_mut(&mut matches));
    match parsed {
        Ok(options) => Ok(Parsed::Options(options)),
        Err(err) if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = err.print();
            Ok(Parsed::Shown)
        }
        Err(err) => Err(UsageError::from_clap(&err, rules)),
    }
}

/// A command line the client cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// An option the program does not have.
    UnknownOption(String),
    /// Options clap refuses together, or a value it cannot take: its own words.
    Rejected(String),
    /// Nothing to run; what is missing (`"command"`, `"runtime and command"`, `"command after the runtime"`).
    Missing(&'static str),
    /// An option given what it does not take; `rule` says what it takes (`--attach` "takes a runtime and a run id").
    Arguments { option: &'static str, rule: &'static str },
    /// An argument of the command is not UTF-8 (`position` 1 is the command itself).
    NotUtf8 { position: usize, arg: OsString },
}

impl UsageError {
    fn from_clap(err: &clap::Error, rules: &[(&'static str, &'static str)]) -> Self {
        let invalid = match err.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(arg)) => Some(arg.as_str()),
            _ => None,
        };
        if let Some((option, rule)) = invalid.and_then(|arg| rules.iter().find(|(option, _)| arg.starts_with(option))) {
            return UsageError::Arguments { option, rule };
        }
        match (err.kind(), invalid) {
            (ErrorKind::UnknownArgument, Some(arg)) => UsageError::UnknownOption(arg.to_owned()),
            _ => {
                let text = err.render().to_string();
                let first = text.lines().next().unwrap_or_default();
                UsageError::Rejected(first.strip_prefix("error: ").unwrap_or(first).to_owned())
            }
        }
    }

    /// Whether the program's usage lines belong after the message: for a command line that does not say what to
    /// run, not for one whose command cannot travel.
    pub fn shows_usage(&self) -> bool {
        !matches!(self, UsageError::NotUtf8 { .. })
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::UnknownOption(option) => write!(f, "unknown option {option}"),
            UsageError::Rejected(what) => f.write_str(what),
            UsageError::Missing(what) => write!(f, "missing {what}"),
            UsageError::Arguments { option, rule } => write!(f, "{option} {rule}"),
            UsageError::NotUtf8 { position, arg } => {
                write!(f, "argument {position} ({arg:?}) is not valid UTF-8 and cannot be forwarded")
            }
        }
    }
}

impl std::error::Error for UsageError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn every_argument_is_kept_or_the_bad_one_named() {
        let args = vec![OsString::from("ls"), OsString::from("-la")];
        assert_eq!(command_args(&args).unwrap(), ["ls", "-la"]);
        let args = vec![OsString::from("cat"), OsString::from_vec(vec![0xff])];
        let err = command_args(&args).unwrap_err();
        assert_eq!(err, UsageError::NotUtf8 { position: 2, arg: OsString::from_vec(vec![0xff]) });
        assert!(err.to_string().starts_with("argument 2 "));
    }
}
