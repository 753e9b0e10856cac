//! The command line both clients forward: everything after the client's own options is the command's, flags
//! included (`sidecar-exec node npm -v` runs `npm -v`, `ssh-exec ls -la` runs `ls -la`), and the mistakes a command
//! line can hold.

use std::ffi::OsString;
use std::fmt;

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

/// A command line the client cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// An option the program does not have.
    UnknownOption(String),
    /// Nothing to run; what is missing (`"command"`, `"runtime and command"`, `"command after the runtime"`).
    Missing(&'static str),
    /// An option given what it does not take; `rule` says what it takes (`--attach` "takes a runtime and a run id").
    Arguments { option: &'static str, rule: &'static str },
    /// An argument of the command is not UTF-8 (`position` 1 is the command itself).
    NotUtf8 { position: usize, arg: OsString },
}

impl UsageError {
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
