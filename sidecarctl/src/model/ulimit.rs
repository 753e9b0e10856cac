//! A resource limit every container of a run gets (`--ulimit`, the profile's `ulimits:`).

/// The names Docker and Podman take (`docker run --ulimit`): the RLIMIT_* resources without the prefix.
pub const NAMES: [&str; 15] = [
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// One limit, as `docker run --ulimit` takes it (`HostConfig.Ulimits`, compose's `ulimits:`); -1 is unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ulimit {
    pub name: String,
    pub soft: i64,
    pub hard: i64,
}

impl Ulimit {
    /// `NAME=SOFT[:HARD]`, HARD defaulting to SOFT (as `docker run --ulimit`). The name must be one the engines
    /// know (an unknown one fails only when a container starts, after the builders), a value a whole number or -1
    /// (unlimited), soft at most hard, and `nofile`/`nproc` at least 1: with 0 no process can open its own binary
    /// or start at all, which the runtime reports as an opaque start error. The caller names the value in its
    /// error (`ModelError::BadUlimit`).
    pub fn parse(text: &str) -> Result<Ulimit, UlimitProblem> {
        let (name, limits) = text.split_once('=').ok_or(UlimitProblem::Shape)?;
        let (soft, hard) = limits.split_once(':').unwrap_or((limits, limits));
        let soft: i64 = soft.trim().parse().map_err(|_| UlimitProblem::Shape)?;
        let hard: i64 = hard.trim().parse().map_err(|_| UlimitProblem::Shape)?;
        let name = name.trim();
        if !NAMES.contains(&name) {
            return Err(UlimitProblem::UnknownName);
        }
        // -1 is RLIM_INFINITY: above any number.
        let order = |v: i64| if v == -1 { u64::MAX } else { v as u64 };
        if soft < -1 || hard < -1 || order(soft) > order(hard) {
            return Err(UlimitProblem::Range);
        }
        if matches!(name, "nofile" | "nproc") && (soft == 0 || hard == 0) {
            return Err(UlimitProblem::Zero);
        }
        Ok(Ulimit { name: name.to_owned(), soft, hard })
    }
}

/// What is wrong with a `--ulimit` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UlimitProblem {
    /// Not `NAME=SOFT[:HARD]` with numbers.
    #[error("is not NAME=SOFT[:HARD] with numbers (e.g. nofile=4096:4096)")]
    Shape,
    #[error("names no limit the engines know (one of: {})", NAMES.join(", "))]
    UnknownName,
    /// Below -1, or soft above hard.
    #[error("needs whole numbers or -1 (unlimited), the soft limit at most the hard")]
    Range,
    /// `nofile` or `nproc` of 0.
    #[error("would let no container start: nofile and nproc must be at least 1")]
    Zero,
}
