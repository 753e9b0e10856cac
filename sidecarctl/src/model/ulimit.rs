//! A resource limit every container of a run gets (`--ulimit`, the profile's `ulimits:`).

use super::ModelError;

/// One limit, as `docker run --ulimit` takes it (`HostConfig.Ulimits`, compose's `ulimits:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

impl Ulimit {
    /// `NAME=SOFT[:HARD]`, HARD defaulting to SOFT (as `docker run --ulimit`).
    pub fn parse(text: &str) -> Result<Ulimit, ModelError> {
        let bad = || ModelError::BadUlimit { value: text.to_owned() };
        let (name, limits) = text.split_once('=').ok_or_else(bad)?;
        let (soft, hard) = limits.split_once(':').unwrap_or((limits, limits));
        let soft: i64 = soft.trim().parse().map_err(|_| bad())?;
        let hard: i64 = hard.trim().parse().map_err(|_| bad())?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || soft > hard {
            return Err(bad());
        }
        Ok(Ulimit { name: name.to_owned(), soft, hard })
    }
}
