//! The one usage or configuration error both programs have: printed as one `<program>: …` line, exit 1.

/// A configuration mistake: printed as one `sidecar-exec: …` line, exit 1.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
