//! The prebuilt binaries `image build --base` copies in (`BINARIES=prebuilt`): `images/dist/exec-server`,
//! `sidecar-exec` and `ssh-exec`, as `images/binaries.sh --dist` builds and places them.
//!
//! Decision: they are current when all three exist and are no older than the newest file the Dockerfile's
//! `compiled` stage copies (the manifests and the crates: the very inputs of the binaries, read from the
//! Dockerfile, so the two lists cannot drift). "No older" is measured from the later of the oldest binary and
//! `images/dist/.built`, which `binaries.sh --dist` touches when it finishes: it replaces only the binaries whose
//! bytes changed (so a build's layer cache keeps the others), and the mark says the rest were found current too.
//! Otherwise `images/binaries.sh --dist` runs first (cargo, on the host: a release build, minutes the first time).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The three binaries, in `images/dist/`.
pub const BINARIES: [&str; 3] = ["exec-server", "sidecar-exec", "ssh-exec"];

/// Why the binaries must be built first, or `None` when they are current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    Missing { path: PathBuf },
    Older { source: PathBuf },
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::Missing { path } => write!(f, "{} is missing", path.display()),
            Stale::Older { source } => write!(f, "{} is newer than the binaries in images/dist", source.display()),
        }
    }
}

/// The paths the Dockerfile's `compiled` stage copies from the context (every `COPY` source from its `FROM` to its
/// first `RUN`), relative to the context.
pub fn compiled_inputs(dockerfile: &str) -> Vec<String> {
    let mut inputs = Vec::new();
    let mut inside = false;
    for line in dockerfile.lines().map(str::trim) {
        if line.starts_with("FROM ") {
            if inside {
                break;
            }
            inside = line.ends_with(" AS compiled");
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("RUN ") {
            break;
        }
        if let Some(args) = line.strip_prefix("COPY ") {
            let words: Vec<&str> = args.split_whitespace().filter(|w| !w.starts_with("--")).collect();
            if let Some((_, sources)) = words.split_last() {
                inputs.extend(sources.iter().map(|s| s.to_string()));
            }
        }
    }
    inputs
}

/// Whether `context`'s images/dist holds current binaries (see the module's decision).
pub fn stale(context: &Path) -> Option<Stale> {
    let dist = context.join("images/dist");
    let mut built: Option<SystemTime> = None;
    for name in BINARIES {
        let path = dist.join(name);
        let Some(modified) = modified(&path) else { return Some(Stale::Missing { path }) };
        built = Some(built.map_or(modified, |b| b.min(modified)));
    }
    let built = built?.max(modified(&dist.join(".built")).unwrap_or(SystemTime::UNIX_EPOCH));
    let dockerfile = std::fs::read_to_string(context.join("images/Dockerfile")).unwrap_or_default();
    let inputs = compiled_inputs(&dockerfile);
    if inputs.is_empty() {
        return Some(Stale::Older { source: context.join("images/Dockerfile") });
    }
    inputs.iter().find_map(|input| newer_than(&context.join(input), built).map(|source| Stale::Older { source }))
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.symlink_metadata().and_then(|m| m.modified()).ok()
}

/// The first file at or under `path` modified after `time` (`target` folders skipped: cargo's output).
fn newer_than(path: &Path, time: SystemTime) -> Option<PathBuf> {
    let meta = path.symlink_metadata().ok()?;
    if meta.is_dir() {
        let entries = std::fs::read_dir(path).ok()?;
        return entries
            .flatten()
            .filter(|e| e.file_name() != "target")
            .find_map(|entry| newer_than(&entry.path(), time));
    }
    meta.modified().ok().filter(|m| *m > time).map(|_| path.to_path_buf())
}
