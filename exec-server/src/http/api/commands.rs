//! Which of its runtime's commands the server has (docs/exec-server.md, "Which commands exist"): `/info`'s `commands`,
//! those of [`protocol::commands_for`] found on the PATH commands start with. Looked up when the server starts, and
//! again when `/info` is asked and the last look is more than [`REFRESH`] old: a `pip install` or an `npm i -g` in the
//! builder can add one, and a client installing its wrappers should see it without a restart.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use process_group::program;

/// How old a look may be before `/info` looks again.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The runtime's commands and where to look for them.
#[derive(Debug)]
pub struct Commands {
    /// `None` for a runtime the table does not know: then the server does not say.
    table: Option<&'static [&'static str]>,
    /// The PATH of the server's environment, which every command starts from.
    path: OsString,
    /// What relative PATH entries are relative to: the workspace root, where commands run by default.
    root: PathBuf,
    last: Mutex<(Instant, Vec<String>)>,
}

impl Commands {
    /// Looks them up now.
    pub fn new(runtime: &str, base_env: &[(OsString, OsString)], root: PathBuf) -> Self {
        let path = base_env
            .iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map_or_else(|| OsString::from(program::DEFAULT_PATH), |(_, value)| value.clone());
        let mut commands = Commands {
            table: protocol::commands_for(runtime),
            path,
            root,
            last: Mutex::new((Instant::now(), Vec::new())),
        };
        let found = commands.look();
        commands.last = Mutex::new((Instant::now(), found));
        commands
    }

    /// The runtime's commands on the PATH, in the table's order (looked up again when the last look is old); `None`
    /// for a runtime the table does not know.
    pub fn current(&self) -> Option<Vec<String>> {
        self.table?;
        let mut last = self.last.lock().unwrap();
        if last.0.elapsed() > REFRESH {
            *last = (Instant::now(), self.look());
        }
        Some(last.1.clone())
    }

    fn look(&self) -> Vec<String> {
        let table = self.table.unwrap_or_default();
        let on_path =
            |name: &str| program::executables_on_path(OsStr::new(name), &self.path, &self.root).next().is_some();
        table.iter().filter(|name| on_path(name)).map(|name| (*name).to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn only_the_commands_on_path_in_the_tables_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["npx", "node", "unrelated"] {
            let file = dir.path().join(name);
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(dir.path().join("npm"), "not executable").unwrap();
        let env = [(OsString::from("PATH"), dir.path().as_os_str().to_owned())];
        let commands = Commands::new("node", &env, dir.path().to_path_buf());
        assert_eq!(commands.current(), Some(vec!["npx".to_owned(), "node".to_owned()]));
        assert_eq!(Commands::new("cobol", &env, dir.path().to_path_buf()).current(), None);
    }
}
