//! Which variables a forwarded command gets, for both clients: the client's allowlist
//! (SIDECAR_ENV_PASSTHROUGH or SSH_ENV_PASSTHROUGH, names and `PREFIX*` patterns) and a default allowlist of
//! harmless terminal and locale variables; nothing else crosses.

use std::collections::BTreeMap;

use crate::env::{self, Entry, Problem, VariableError};

/// Where a client's allowlist is read from: the list's variable, the switch that turns [`DEFAULTS`] off, and what
/// the list's entries (and the variables it sends) may be.
#[derive(Debug, Clone, Copy)]
pub struct Allowlist {
    pub list: &'static str,
    pub defaults_switch: &'static str,
    pub entry: Entry,
}

/// The default allowlist: non-secret variables that change how a tool prints or formats, which a native run sees.
/// `LC_*` is a pattern. The client's [`Allowlist::defaults_switch`] set to `0` turns it off.
pub const DEFAULTS: &[&str] = &[
    "TERM",
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CI",
];

/// What is sent: every variable with its value, and which names came from [`DEFAULTS`] only (their values may be
/// shown by `--explain`; a passthrough value may be a secret).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SentEnv {
    pub values: BTreeMap<String, String>,
    pub defaults: Vec<String>,
}

/// The variables to send, from this process's environment. A variable whose name the entry kind cannot carry
/// (ssh-exec assigns each in a shell: a name such as `LC_x.y` that a pattern matches) is left out.
pub fn from_env(allowlist: Allowlist) -> Result<SentEnv, VariableError> {
    let here: Vec<(String, Option<String>)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok())))
        .filter(|(name, _)| allowlist.entry.carries(name))
        .collect();
    let listed = env::names(allowlist.list, allowlist.entry)?;
    select(allowlist.list, &here, &listed, !env::switched_off(allowlist.defaults_switch))
}

/// Whether `name` is matched by `entry`: equal, or `entry` ends with `*` and `name` starts with what precedes it.
pub fn matches(entry: &str, name: &str) -> bool {
    match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => entry == name,
    }
}

/// [`from_env`] over `here` (names with their values, `None` for a value that is not UTF-8).
fn select(
    list: &'static str,
    here: &[(String, Option<String>)],
    listed: &[String],
    defaults: bool,
) -> Result<SentEnv, VariableError> {
    let mut sent = SentEnv::default();
    for (name, value) in here {
        if let Some(entry) = listed.iter().find(|entry| matches(entry, name)) {
            let Some(value) = value else {
                return Err(VariableError {
                    name: list,
                    value: entry.clone(),
                    problem: Problem::ListedNotUtf8 { listed: name.clone() },
                });
            };
            sent.values.insert(name.clone(), value.clone());
        } else if let (true, Some(value)) = (defaults && DEFAULTS.iter().any(|entry| matches(entry, name)), value) {
            // A default that is not UTF-8 is left out: nobody asked for it by name.
            sent.values.insert(name.clone(), value.clone());
            sent.defaults.push(name.clone());
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here(pairs: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        pairs.iter().map(|(name, value)| ((*name).to_owned(), value.map(str::to_owned))).collect()
    }

    #[test]
    fn defaults_patterns_and_nothing_else() {
        let env = here(&[
            ("TERM", Some("xterm")),
            ("LC_ALL", Some("C.UTF-8")),
            ("NPM_CONFIG_REGISTRY", Some("http://r")),
            ("NPM_TOKEN", Some("secret")),
            ("AWS_SECRET_ACCESS_KEY", Some("s")),
            ("FOO", Some("bar")),
        ]);
        let sent = select("L", &env, &["NPM_CONFIG_*".into(), "FOO".into()], true).unwrap();
        let names: Vec<&str> = sent.values.keys().map(String::as_str).collect();
        assert_eq!(names, ["FOO", "LC_ALL", "NPM_CONFIG_REGISTRY", "TERM"]);
        assert_eq!(sent.defaults, ["TERM", "LC_ALL"]);
        let off = select("L", &env, &[], false).unwrap();
        assert!(off.values.is_empty());
    }

    #[test]
    fn a_listed_variable_that_is_not_utf8_is_an_error_a_default_is_left_out() {
        assert!(select("L", &here(&[("LANG", None)]), &[], true).unwrap().values.is_empty());
        let err = select("L", &here(&[("NPM_CONFIG_X", None)]), &["NPM_CONFIG_*".into()], true).unwrap_err();
        assert_eq!(err.problem, Problem::ListedNotUtf8 { listed: "NPM_CONFIG_X".into() });
        assert!(matches("A*", "A") && matches("A*", "AB") && !matches("A", "AB") && matches("*", "X"));
    }
}
