//! Names and labels of everything a run creates. Every object carries `sidecarctl.run=<id>`, so teardown, `ps`,
//! `logs` and `down` find a run's objects by label, never by remembering what was created (a Ctrl-C between an
//! API call and its bookkeeping cannot leak an object).

use std::collections::HashMap;
use std::io::Read;

use crate::runtime::Runtime;

pub const LABEL_MANAGED: &str = "sidecarctl.managed";
pub const LABEL_RUN: &str = "sidecarctl.run";
pub const LABEL_ROLE: &str = "sidecarctl.role";
pub const LABEL_RUNTIME: &str = "sidecarctl.runtime";
pub const LABEL_NETWORK: &str = "sidecarctl.network";
/// The folder holding the run's token file, so `down` can remove it for a detached run.
pub const LABEL_TOKEN_DIR: &str = "sidecarctl.token-dir";
/// Who started the run (uid) and from which workspace: `down` without a run name removes only the caller's runs
/// of the current folder, as `docker compose down` removes only its project's.
pub const LABEL_OWNER: &str = "sidecarctl.owner";
pub const LABEL_WORKSPACE: &str = "sidecarctl.workspace";

pub const ROLE_NETWORK: &str = "build-network";
pub const ROLE_BUILDER: &str = "build-sidecar";
pub const ROLE_AGENT: &str = "agent";

/// A run's name, in every object's name and label: `--name`, or 8 random hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunName(String);

/// `--name` must make valid container and network names: letters, digits, `-`, `_`, `.`, starting alphanumeric.
#[derive(Debug, PartialEq, Eq)]
pub struct BadRunName(pub String);

impl std::fmt::Display for BadRunName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run name '{}' must be letters, digits, '-', '_' or '.', starting with a letter or digit", self.0)
    }
}

impl RunName {
    pub fn random() -> RunName {
        RunName(random_hex(4))
    }

    pub fn named(name: &str) -> Result<RunName, BadRunName> {
        let valid = name.len() <= 48
            && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Ok(RunName(name.to_owned()))
        } else {
            Err(BadRunName(name.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn network(&self) -> String {
        format!("sidecarctl-{}", self.0)
    }

    /// The engine's name of the planned container `planned` (`builder-RT`, `agent`).
    pub fn container(&self, planned: &str) -> String {
        format!("sidecarctl-{}-{planned}", self.0)
    }

    pub fn builder(&self, runtime: Runtime) -> String {
        self.container(&runtime.alias())
    }

    pub fn agent(&self) -> String {
        self.container("agent")
    }

    /// The labels of one object of this run, started by `origin`.
    pub fn labels(&self, role: &str, runtime: Option<Runtime>, origin: &Origin) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_RUN.to_owned(), self.0.clone()),
            (LABEL_ROLE.to_owned(), role.to_owned()),
            (LABEL_NETWORK.to_owned(), self.network()),
            (LABEL_OWNER.to_owned(), origin.uid.to_string()),
            (LABEL_WORKSPACE.to_owned(), origin.workspace.clone()),
        ]);
        if let Some(runtime) = runtime {
            labels.insert(LABEL_RUNTIME.to_owned(), runtime.to_string());
        }
        labels
    }
}

/// Who starts a run, and from which workspace folder (canonical).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub uid: u32,
    pub workspace: String,
}

impl Origin {
    /// The caller, in `workspace`.
    pub fn caller(workspace: &std::path::Path) -> Origin {
        Origin { uid: nix::unistd::getuid().as_raw(), workspace: workspace.display().to_string() }
    }

    /// The label filters that select this origin's objects.
    pub fn filters(&self) -> Vec<String> {
        vec![format!("{LABEL_OWNER}={}", self.uid), format!("{LABEL_WORKSPACE}={}", self.workspace)]
    }
}

impl std::fmt::Display for RunName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `bytes` random bytes from the kernel, as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).expect("/dev/urandom is readable");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels() {
        let id = RunName::named("ci-1").unwrap();
        assert_eq!(id.network(), "sidecarctl-ci-1");
        assert_eq!(id.builder(Runtime::Node), "sidecarctl-ci-1-builder-node");
        assert_eq!(id.agent(), "sidecarctl-ci-1-agent");
        let origin = Origin { uid: 2345, workspace: "/src/app".into() };
        let labels = id.labels(ROLE_BUILDER, Some(Runtime::Go), &origin);
        assert_eq!((labels[LABEL_OWNER].as_str(), labels[LABEL_WORKSPACE].as_str()), ("2345", "/src/app"));
        assert_eq!(origin.filters(), ["sidecarctl.owner=2345", "sidecarctl.workspace=/src/app"]);
        assert_eq!(labels[LABEL_RUN], "ci-1");
        assert_eq!(labels[LABEL_RUNTIME], "go");
        assert_eq!(labels[LABEL_ROLE], "build-sidecar");
        for bad in ["", "-x", "a b", "a/b", &"x".repeat(49)] {
            assert_eq!(RunName::named(bad), Err(BadRunName(bad.to_owned())));
        }
        let random = RunName::random();
        assert_eq!(random.as_str().len(), 8);
        assert_ne!(random, RunName::random());
    }
}
