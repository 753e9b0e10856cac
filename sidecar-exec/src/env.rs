//! Reading the clients' variables, one rule per kind of value: text, switches, counts, seconds and lists of names.
//! Both programs read every variable through these, so `SIDECAR_TIMEOUT` and `SSH_CONNECT_TIMEOUT` take seconds by
//! the same rule, and `SIDECAR_ENV_PASSTHROUGH` and `SSH_ENV_PASSTHROUGH` are the same kind of list (sent by
//! [`crate::env_sent`]).
//!
//! Unset and blank (spaces only) are always the same: the default.

use std::fmt;
use std::time::Duration;

/// A variable's value, trimmed; `None` when unset or blank.
pub fn text(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|value| value.trim().to_owned()).filter(|value| !value.is_empty())
}

/// A switch that is off unless turned on: `1`, `true`, `yes` or `on`.
pub fn switched_on(name: &str) -> bool {
    matches!(text(name).as_deref(), Some("1" | "true" | "yes" | "on"))
}

/// A switch that is on unless turned off: `0`, `false`, `no` or `off`.
pub fn switched_off(name: &str) -> bool {
    matches!(text(name).as_deref(), Some("0" | "false" | "no" | "off"))
}

/// A whole number from `min` to `max`; `default` when unset.
pub fn count(name: &'static str, default: u32, min: u32, max: u32) -> Result<u32, VariableError> {
    let Some(value) = text(name) else { return Ok(default) };
    let within = value.parse::<u32>().ok().filter(|n| (min..=max).contains(n));
    within.ok_or(VariableError { name, value, problem: Problem::NotACount { min, max } })
}

/// How finely a variable takes seconds: as finely as what it sets can use (the wire's `timeout` and ssh's options
/// are whole seconds, the host's stop loop counts tenths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// `600`.
    WholeSeconds,
    /// `2` or `0.5`: at most one decimal.
    Tenths,
}

/// Seconds within `min..=max` (`max` none: no bound); `None` when unset. The one rule for every variable that takes
/// seconds: digits, then for [`Resolution::Tenths`] optionally `.` and one digit; no sign, no exponent, no unit.
pub fn seconds(
    name: &'static str,
    resolution: Resolution,
    min: u64,
    max: Option<u64>,
) -> Result<Option<Duration>, VariableError> {
    text(name).map(|value| seconds_in(name, value, resolution, min, max)).transpose()
}

/// [`seconds`] of a value already read.
fn seconds_in(
    name: &'static str,
    value: String,
    resolution: Resolution,
    min: u64,
    max: Option<u64>,
) -> Result<Duration, VariableError> {
    let within = |duration: &Duration| {
        *duration >= Duration::from_secs(min) && max.is_none_or(|max| *duration <= Duration::from_secs(max))
    };
    match parse_seconds(&value, resolution).filter(within) {
        Some(duration) => Ok(duration),
        None => Err(VariableError { name, value, problem: Problem::NotSeconds { resolution, min, max } }),
    }
}

fn parse_seconds(value: &str, resolution: Resolution) -> Option<Duration> {
    let (whole, tenth) = match (value.split_once('.'), resolution) {
        (None, _) => (value, "0"),
        (Some((whole, tenth)), Resolution::Tenths) if tenth.len() == 1 => (whole, tenth),
        (Some(_), _) => return None,
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(tenth) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let tenth: u64 = tenth.parse().ok()?;
    Some(Duration::from_secs(whole) + Duration::from_millis(tenth * 100))
}

/// What the entries of a list must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Any name of a variable this process can hold (the HTTP API sets it in the command's environment as it is).
    AnyVariable,
    /// A shell variable name (letters, digits and `_`, not starting with a digit: it is assigned in a shell), or a
    /// pattern `PREFIX*` of them (`NPM_CONFIG_*`; `*` alone: every variable).
    ShellVariableOrPattern,
    /// A plain command name (letters, digits, `.`, `_`, `+`, `-`; no path, not starting with `.` or `-`).
    Command,
}

impl Entry {
    fn admits(self, entry: &str) -> bool {
        match self {
            Entry::AnyVariable => true,
            Entry::ShellVariableOrPattern => match entry.strip_suffix('*') {
                Some(prefix) => prefix.is_empty() || is_shell_variable(prefix),
                None => is_shell_variable(entry),
            },
            Entry::Command => {
                entry.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)) && !entry.starts_with(['.', '-'])
            }
        }
    }
}

impl Entry {
    /// Whether a variable named `name` can be sent where the list's entries go (assigned in a shell, or set as it
    /// is by the HTTP API).
    pub fn carries(self, name: &str) -> bool {
        match self {
            Entry::AnyVariable => true,
            Entry::ShellVariableOrPattern => is_shell_variable(name),
            Entry::Command => false,
        }
    }
}

/// A list of names: separated by commas (the contract's `SIDECAR_ENV_PASSTHROUGH` is a comma list) or whitespace,
/// each checked against `entry`, in the order given, each once.
pub fn names(name: &'static str, entry: Entry) -> Result<Vec<String>, VariableError> {
    let list = std::env::var(name).unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for item in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|item| !item.is_empty()) {
        if !entry.admits(item) {
            return Err(VariableError {
                name,
                value: list.clone(),
                problem: Problem::BadEntry { entry, item: item.into() },
            });
        }
        if !names.iter().any(|seen| seen == item) {
            names.push(item.to_owned());
        }
    }
    Ok(names)
}

/// Letters, digits and `_`, not starting with a digit.
pub fn is_shell_variable(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A variable whose value the client cannot use: its name, its value as set, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableError {
    pub name: &'static str,
    pub value: String,
    pub problem: Problem,
}

/// What is wrong with a variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not a whole number from `min` to `max`.
    NotACount { min: u32, max: u32 },
    /// Not seconds by the rule of [`seconds`].
    NotSeconds { resolution: Resolution, min: u64, max: Option<u64> },
    /// An entry of a list is not what the list holds.
    BadEntry { entry: Entry, item: String },
    /// A variable the list names is set, but not to UTF-8.
    ListedNotUtf8 { listed: String },
}

impl fmt::Display for VariableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, value) = (self.name, &self.value);
        match &self.problem {
            Problem::NotACount { min, max } => {
                write!(f, "{name} must be a whole number from {min} to {max}, got {value:?}")
            }
            Problem::NotSeconds { resolution: Resolution::WholeSeconds, min: _, max: None } => {
                write!(f, "{name} must be a whole number of seconds, got {value:?}")
            }
            Problem::NotSeconds { resolution: Resolution::WholeSeconds, min, max: Some(max) } => {
                write!(f, "{name} must be a whole number of seconds from {min} to {max}, got {value:?}")
            }
            Problem::NotSeconds { resolution: Resolution::Tenths, min, max } => {
                let max = max.map_or_else(|| "any".to_owned(), |max| max.to_string());
                write!(
                    f,
                    "{name} must be seconds from {min} to {max} with at most one decimal (e.g. 0.5), got {value:?}"
                )
            }
            Problem::BadEntry { entry: Entry::ShellVariableOrPattern, item } => write!(
                f,
                "{name} names {item:?}, which is neither a variable name (letters, digits and _, not starting with \
                 a digit) nor a pattern of them (NPM_CONFIG_*)"
            ),
            Problem::BadEntry { entry: Entry::AnyVariable, item } => write!(
                f,
                "{name} names {item:?}, which is not a variable name (letters, digits and _, not starting with a digit)"
            ),
            Problem::BadEntry { entry: Entry::Command, item } => {
                write!(f, "{name} names {item:?}, which is not a command name (letters, digits, . _ + -, no path)")
            }
            Problem::ListedNotUtf8 { listed } => {
                write!(f, "{listed} (listed in {name}) is not valid UTF-8 and cannot be forwarded")
            }
        }
    }
}

impl std::error::Error for VariableError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_follow_one_rule_at_two_resolutions() {
        let tenths = |value: &str| parse_seconds(value, Resolution::Tenths).map(|d| d.as_millis() / 100);
        let cases = [("5", Some(50)), ("0.5", Some(5)), ("0", Some(0)), ("600", Some(6000)), ("007", Some(70))];
        for (value, expected) in cases {
            assert_eq!(tenths(value), expected, "{value:?}");
        }
        for bad in ["0.25", "-1", "+1", "1e3", "abc", ".5", "5.", "1.5.5", "5s", "1 0", "99999999999999999999"] {
            assert_eq!(tenths(bad), None, "{bad:?}");
        }
        assert_eq!(parse_seconds("600", Resolution::WholeSeconds), Some(Duration::from_secs(600)));
        assert_eq!(parse_seconds("0.5", Resolution::WholeSeconds), None);
        let grace = |value: &str| seconds_in("G", value.into(), Resolution::Tenths, 0, Some(600));
        assert_eq!(grace("600").unwrap(), Duration::from_secs(600));
        let refused = grace("601").unwrap_err();
        assert_eq!(refused.problem, Problem::NotSeconds { resolution: Resolution::Tenths, min: 0, max: Some(600) });
        let connect = |value: &str| seconds_in("C", value.into(), Resolution::WholeSeconds, 1, Some(3600));
        assert!(connect("0").is_err() && connect("1").is_ok() && connect("3601").is_err());
    }

    #[test]
    fn every_mistake_names_the_variable_and_what_it_takes() {
        let error = |problem| VariableError { name: "X", value: "v".into(), problem }.to_string();
        let whole = |max| Problem::NotSeconds { resolution: Resolution::WholeSeconds, min: 0, max };
        assert_eq!(error(whole(None)), "X must be a whole number of seconds, got \"v\"");
        assert_eq!(error(whole(Some(9))), "X must be a whole number of seconds from 0 to 9, got \"v\"");
        let tenths = Problem::NotSeconds { resolution: Resolution::Tenths, min: 0, max: Some(600) };
        assert!(error(tenths).starts_with("X must be seconds from 0 to 600 with at most one decimal"));
        assert_eq!(
            error(Problem::NotACount { min: 1, max: 65535 }),
            "X must be a whole number from 1 to 65535, got \"v\""
        );
    }

    #[test]
    fn list_entries() {
        assert!(is_shell_variable("GOFLAGS") && is_shell_variable("_x1"));
        for bad in ["1X", "A-B", "", "A;B"] {
            assert!(!is_shell_variable(bad), "{bad:?}");
        }
        assert!(Entry::Command.admits("xcodebuild") && Entry::Command.admits("g++") && Entry::Command.admits("a.b"));
        for bad in ["../../bin/sh", ".hidden", "-rf", "a/b", "a b"] {
            assert!(!Entry::Command.admits(bad), "{bad:?}");
        }
        assert!(Entry::AnyVariable.admits("A-B"));
        let pattern = Entry::ShellVariableOrPattern;
        assert!(pattern.admits("NPM_CONFIG_*") && pattern.admits("*") && pattern.admits("FOO"));
        for bad in ["1*", "A-*", "A*B", "**", "A;B"] {
            assert!(!pattern.admits(bad), "{bad:?}");
        }
        assert!(pattern.carries("LC_ALL") && !pattern.carries("LC_x.y") && Entry::AnyVariable.carries("LC_x.y"));
    }
}
