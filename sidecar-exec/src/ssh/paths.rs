//! The workspace mapping: this container's workspace (SSH_WORKSPACE) is a folder on the host (SSH_HOST_CWD). The
//! current directory and the arguments that name a path in the workspace are rewritten to the host's path.

/// SSH_WORKSPACE → SSH_HOST_CWD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The workspace as configured, and as the file system resolves it (symlinks) when that differs: the current
    /// directory comes from getcwd, which is resolved, while arguments are written as the user sees the path.
    workspaces: Vec<String>,
    host: String,
}

impl Mapping {
    pub fn new(workspace: &str, host: &str) -> Result<Self, PathsError> {
        if !workspace.starts_with('/') {
            return Err(PathsError::RelativeWorkspace(workspace.to_owned()));
        }
        if !host.starts_with('/') {
            return Err(PathsError::RelativeHostCwd(host.to_owned()));
        }
        let workspace = trimmed(workspace);
        let mut workspaces = vec![workspace.to_owned()];
        if let Some(real) = std::fs::canonicalize(workspace).ok().and_then(|p| p.to_str().map(str::to_owned)) {
            if real != workspace {
                workspaces.push(real);
            }
        }
        Ok(Mapping { workspaces, host: trimmed(host).to_owned() })
    }

    /// The host directory for the local `cwd`, or a refusal when `cwd` is outside the workspace (the host has no
    /// counterpart for it, and running elsewhere would be a surprise).
    pub fn cwd(&self, cwd: &str) -> Result<String, PathsError> {
        self.map(cwd).ok_or_else(|| PathsError::OutsideWorkspace {
            cwd: cwd.to_owned(),
            workspace: self.workspaces[0].clone(),
            host: self.host.clone(),
        })
    }

    /// An argument with its workspace path mapped: `/workspace/x` and `--flag=/workspace/x`; anything else as is.
    pub fn arg(&self, arg: &str) -> String {
        if let Some(mapped) = self.map(arg) {
            return mapped;
        }
        if let Some((flag, value)) = arg.split_once('=') {
            if flag.starts_with('-') {
                if let Some(mapped) = self.map(value) {
                    return format!("{flag}={mapped}");
                }
            }
        }
        arg.to_owned()
    }

    fn map(&self, path: &str) -> Option<String> {
        self.workspaces.iter().find_map(|workspace| {
            let rest = if workspace == "/" {
                path.strip_prefix('/').map(|rest| format!("/{rest}"))?
            } else {
                let rest = path.strip_prefix(workspace.as_str())?;
                if !rest.is_empty() && !rest.starts_with('/') {
                    return None;
                }
                rest.to_owned()
            };
            let host = if self.host == "/" { "" } else { self.host.as_str() };
            Some(if rest.is_empty() { self.host.clone() } else { format!("{host}{rest}") })
        })
    }
}

/// Why the mapping cannot be made, or has no place on the host for the current directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathsError {
    #[error("SSH_WORKSPACE must be an absolute path, got {0:?}")]
    RelativeWorkspace(String),
    #[error("SSH_HOST_CWD must be the absolute path of the workspace on the host, got {0:?}")]
    RelativeHostCwd(String),
    #[error(
        "the current directory {cwd} is outside the workspace {workspace} that SSH_HOST_CWD maps to {host} on the \
         host: cd into the workspace first"
    )]
    OutsideWorkspace { cwd: String, workspace: String, host: String },
}

/// A path without its trailing slashes (but `/` stays `/`).
fn trimmed(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        "/"
    } else {
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping() -> Mapping {
        Mapping::new("/workspace/", "/Users/me/src/project").unwrap()
    }

    #[test]
    fn the_cwd_inside_the_workspace_is_mapped_and_outside_refused() {
        let m = mapping();
        assert_eq!(m.cwd("/workspace").unwrap(), "/Users/me/src/project");
        assert_eq!(m.cwd("/workspace/app/src").unwrap(), "/Users/me/src/project/app/src");
        assert!(
            matches!(m.cwd("/tmp"), Err(PathsError::OutsideWorkspace { workspace, .. }) if workspace == "/workspace")
        );
        assert!(m.cwd("/tmp").unwrap_err().to_string().contains("outside the workspace /workspace"));
        assert!(m.cwd("/workspace2").is_err());
    }

    #[test]
    fn arguments_naming_workspace_paths_are_mapped() {
        let m = mapping();
        assert_eq!(m.arg("/workspace/a b"), "/Users/me/src/project/a b");
        assert_eq!(m.arg("--out=/workspace/build"), "--out=/Users/me/src/project/build");
        assert_eq!(m.arg("-o=/workspace"), "-o=/Users/me/src/project");
        assert_eq!(m.arg("/workspaces/x"), "/workspaces/x");
        assert_eq!(m.arg("x=/workspace/y"), "x=/workspace/y");
        assert_eq!(m.arg("relative/path"), "relative/path");
        assert_eq!(m.arg("/etc/hosts"), "/etc/hosts");
    }

    #[test]
    fn relative_paths_are_refused() {
        assert_eq!(Mapping::new("workspace", "/x"), Err(PathsError::RelativeWorkspace("workspace".into())));
        assert_eq!(Mapping::new("/workspace", "x"), Err(PathsError::RelativeHostCwd("x".into())));
    }
}
