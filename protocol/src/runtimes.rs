//! The one table of runtimes and the commands a builder of each runtime provides (and the agent side wraps).

/// Every runtime this project knows, with the commands its wrappers forward, in a stable order.
pub const RUNTIMES: &[(&str, &[&str])] = &[
    ("node", &["npm", "npx", "pnpm", "yarn", "node"]),
    ("python", &["python", "python3", "pip", "pip3", "poetry", "pytest", "ruff", "black", "mypy"]),
    ("java", &["java", "javac", "mvn", "gradle"]),
    ("go", &["go", "gofmt"]),
    ("rust", &["cargo", "rustc", "rustfmt", "clippy"]),
];

/// The commands of one runtime, or `None` when the runtime is not in the table.
pub fn commands_for(runtime: &str) -> Option<&'static [&'static str]> {
    RUNTIMES.iter().find(|(name, _)| *name == runtime).map(|(_, commands)| *commands)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_command_belongs_to_two_runtimes() {
        let mut seen = std::collections::HashSet::new();
        for (_, commands) in RUNTIMES {
            for command in *commands {
                assert!(seen.insert(command), "{command} is listed twice");
            }
        }
        assert_eq!(commands_for("go"), Some(&["go", "gofmt"][..]));
        assert_eq!(commands_for("ruby"), None);
    }
}
