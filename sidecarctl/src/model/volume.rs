//! A volume of a run: what is mounted (the workspace, a path of this machine, or a named volume) and where.

use std::path::{Path, PathBuf};

/// What a volume mounts. The workspace is its own kind, not a path: `up` binds the folder it resolved, an emitted
/// file names it as written (`${WORKSPACE:-./ws}`), and a Pod gives it a volume of its own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum VolumeSource {
    /// The run's workspace folder (`under` empty), or a folder under it (`under` relative, without `./`).
    Workspace { under: String },
    /// A file or folder of this machine, absolute.
    Host(PathBuf),
    /// A named volume of the engine (teardown never removes one: the caches are what keeps builds fast).
    Named(String),
}

/// A bind or named volume of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub source: VolumeSource,
    pub target: String,
    pub read_only: bool,
}

impl VolumeSource {
    /// The source as written in a profile, after `${CWD}` became the workspace: a path (absolute, or `./`, `../`,
    /// `.`, relative to `cwd`) is a host path, the workspace or under it; anything else names a volume.
    pub fn parse(written: &str, cwd: &Path, workspace: &Path) -> VolumeSource {
        let is_path =
            written.starts_with('/') || written.starts_with("./") || written.starts_with("../") || written == ".";
        if !is_path {
            return VolumeSource::Named(written.to_owned());
        }
        let path = normalize(&cwd.join(written));
        match path.strip_prefix(workspace) {
            Ok(under) => VolumeSource::Workspace { under: under.display().to_string() },
            Err(_) => VolumeSource::Host(path),
        }
    }

    /// The folder or file on this machine for `workspace` (`None` for a named volume).
    pub fn host_path(&self, workspace: &Path) -> Option<PathBuf> {
        match self {
            VolumeSource::Workspace { under } if under.is_empty() => Some(workspace.to_path_buf()),
            VolumeSource::Workspace { under } => Some(workspace.join(under)),
            VolumeSource::Host(path) => Some(path.clone()),
            VolumeSource::Named(_) => None,
        }
    }

    /// The same source, `relative` further in (a named volume cannot be entered: `None`).
    pub fn join(&self, relative: &str) -> Option<VolumeSource> {
        match self {
            VolumeSource::Workspace { under } if under.is_empty() => {
                Some(VolumeSource::Workspace { under: relative.to_owned() })
            }
            VolumeSource::Workspace { under } => Some(VolumeSource::Workspace { under: format!("{under}/{relative}") }),
            VolumeSource::Host(path) => Some(VolumeSource::Host(path.join(relative))),
            VolumeSource::Named(_) => None,
        }
    }

    pub fn is_workspace(&self) -> bool {
        matches!(self, VolumeSource::Workspace { under } if under.is_empty())
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system (the path may not exist, and `..` is lexical here, as
/// in the engine's own bind handling).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
