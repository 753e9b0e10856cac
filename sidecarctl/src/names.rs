//! Names and labels of everything a run creates. Every object carries `sidecarctl.run=<id>`, so teardown, `ps`,
//! `logs` and `down` find a run's objects by label, never by remembering what was created (a Ctrl-C between an
//! API call and its bookkeeping cannot leak an object).

use std::collections::HashMap;

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
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("run name '{0}' must be letters, digits, '-', '_' or '.', starting with a letter or digit")]
pub struct BadRunName(pub String);

impl RunName {
    pub fn random() -> RunName {
        RunName(protocol::random_hex(4).expect("/dev/urandom is readable"))
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

    /// The labels of one object of this run, started by `owner`.
    pub fn labels(&self, role: &str, runtime: Option<Runtime>, owner: &RunOwner) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (LABEL_MANAGED.to_owned(), "true".to_owned()),
            (LABEL_RUN.to_owned(), self.0.clone()),
            (LABEL_ROLE.to_owned(), role.to_owned()),
            (LABEL_NETWORK.to_owned(), self.network()),
            (LABEL_OWNER.to_owned(), owner.uid.to_string()),
            (LABEL_WORKSPACE.to_owned(), owner.workspace.clone()),
        ]);
        if let Some(runtime) = runtime {
            labels.insert(LABEL_RUNTIME.to_owned(), runtime.to_string());
        }
        labels
    }
}

/// Who starts a run, and from which workspace folder (canonical).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOwner {
    pub uid: u32,
    pub workspace: String,
}

impl RunOwner {
    /// The caller, in `workspace`.
    pub fn caller(workspace: &std::path::Path) -> RunOwner {
        RunOwner { uid: nix::unistd::getuid().as_raw(), workspace: workspace.display().to_string() }
    }

    /// The label filters that select this owner's objects.
    pub fn filters(&self) -> Vec<String> {
        vec![format!("{LABEL_OWNER}={}", self.uid), format!("{LABEL_WORKSPACE}={}", self.workspace)]
    }

    /// The owner an object's labels name; `None` for an object without them (made before they existed).
    pub fn of_labels(labels: &HashMap<String, String>) -> Option<RunOwner> {
        let uid = labels.get(LABEL_OWNER)?.parse().ok()?;
        Some(RunOwner { uid, workspace: labels.get(LABEL_WORKSPACE)?.clone() })
    }

    /// Who this other run's maker is to `caller`: the same user (from another folder), or another user.
    fn started_by(&self, caller: &RunOwner) -> StartedBy {
        let workspace = self.workspace.clone();
        if self.uid == caller.uid {
            StartedBy::Folder(workspace)
        } else {
            StartedBy::User { uid: self.uid, workspace }
        }
    }
}

/// The maker of another run, as the caller's messages name it: "from /src/app" (the caller, from another folder),
/// or "by uid 1000 from /src/app" (another user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartedBy {
    /// The caller, from this folder (canonical).
    Folder(String),
    /// Another user (`uid`), from `workspace`.
    User { uid: u32, workspace: String },
}

impl std::fmt::Display for StartedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartedBy::Folder(workspace) => write!(f, "from {workspace}"),
            StartedBy::User { uid, workspace } => write!(f, "by uid {uid} from {workspace}"),
        }
    }
}

/// One object the engine has under a run's name: who made it (its labels), and whether it is a running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub owner: Option<RunOwner>,
    pub running: bool,
}

/// Whose a run name is, from the objects labelled with it. A name belongs to the user and the folder that made the
/// run: container names are global on an engine, so a name is one run's, and `logs RUN` and `down RUN` mean that
/// run wherever they are typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Nothing on the engine carries the name.
    Absent,
    /// Every object is the caller's (this uid, this folder); `running` when one of its containers runs.
    Ours { running: bool },
    /// An object was made by another user or from another folder (the first such); `None` when it has no owner
    /// labels (an older sidecarctl made it), so whose it is cannot be told.
    Theirs(Option<RunOwner>),
}

impl Ownership {
    pub fn of(caller: &RunOwner, held: &[Held]) -> Ownership {
        if held.is_empty() {
            return Ownership::Absent;
        }
        if let Some(other) = held.iter().find(|h| h.owner.as_ref() != Some(caller)) {
            return Ownership::Theirs(other.owner.clone());
        }
        Ownership::Ours { running: held.iter().any(|h| h.running) }
    }

    /// What `up --name NAME` does: `Ok(false)` when the name is free, `Ok(true)` when leftovers of the caller's own
    /// earlier run (nothing running: a run that crashed or was killed) are to be removed first, or why it is
    /// refused: a run of the caller's that still runs (a second `up` would end it unasked), or another's.
    pub fn for_up(self, name: &str, caller: &RunOwner) -> Result<bool, NameTaken> {
        match self {
            Ownership::Absent => Ok(false),
            Ownership::Ours { running: false } => Ok(true),
            Ownership::Ours { running: true } => Err(NameTaken::Running { name: name.to_owned() }),
            Ownership::Theirs(Some(owner)) => {
                Err(NameTaken::Theirs { name: name.to_owned(), by: owner.started_by(caller) })
            }
            Ownership::Theirs(None) => Err(NameTaken::Unlabelled { name: name.to_owned() }),
        }
    }

    /// What `down NAME` does (`everyone`: `--all`): `Ok(())` removes the run; a run that is not there, or another
    /// user's or folder's without `--all`, is refused. A run without owner labels is anyone's to remove.
    pub fn for_down(self, name: &str, caller: &RunOwner, everyone: bool) -> Result<(), NotRemovable> {
        match self {
            Ownership::Absent => Err(NotRemovable::NoSuchRun { name: name.to_owned() }),
            Ownership::Theirs(Some(owner)) if !everyone => {
                Err(NotRemovable::Theirs { name: name.to_owned(), by: owner.started_by(caller) })
            }
            _ => Ok(()),
        }
    }
}

/// Why `up --name NAME` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameTaken {
    /// The caller's own run of this folder still runs.
    #[error(
        "run '{name}' is already running from this folder: `sidecarctl down {name}` ends it first, or choose another \
         --name"
    )]
    Running { name: String },
    /// Another user's or folder's run.
    #[error(
        "run name '{name}' is taken by a run started {by}: choose another --name (`sidecarctl down {name}` there \
         removes that run)"
    )]
    Theirs { name: String, by: StartedBy },
    /// A run without owner labels (an older sidecarctl made it): whose it is cannot be told.
    #[error(
        "run name '{name}' is taken by a run without owner labels (an older sidecarctl's): choose another --name, or \
         remove it with `sidecarctl down {name}`"
    )]
    Unlabelled { name: String },
}

/// Why `down NAME` removes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRemovable {
    #[error("no run '{name}' on this engine (`sidecarctl ps` lists the runs)")]
    NoSuchRun { name: String },
    /// Another user's or folder's run, and no `--all`.
    #[error(
        "run '{name}' was started {by}, not from here: `sidecarctl down {name}` there removes it, or `sidecarctl down \
         --all {name}` from anywhere"
    )]
    Theirs { name: String, by: StartedBy },
}

impl std::fmt::Display for RunName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
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
        let owner = RunOwner { uid: 2345, workspace: "/src/app".into() };
        let labels = id.labels(ROLE_BUILDER, Some(Runtime::Go), &owner);
        assert_eq!((labels[LABEL_OWNER].as_str(), labels[LABEL_WORKSPACE].as_str()), ("2345", "/src/app"));
        assert_eq!(owner.filters(), ["sidecarctl.owner=2345", "sidecarctl.workspace=/src/app"]);
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

    /// A run name is its maker's (uid and folder): `up` elsewhere is refused naming the other folder, `up` here
    /// replaces only leftovers, `down` removes only its own without `--all`, a missing run is said to be missing.
    #[test]
    fn a_run_name_belongs_to_its_user_and_folder() {
        let me = RunOwner { uid: 1000, workspace: "/src/b".into() };
        let other_folder = RunOwner { uid: 1000, workspace: "/src/a".into() };
        let other_user = RunOwner { uid: 0, workspace: "/src/b".into() };
        let held = |owner: &RunOwner, running: bool| Held { owner: Some(owner.clone()), running };
        let of = |held: &[Held]| Ownership::of(&me, held);

        assert_eq!(of(&[]), Ownership::Absent);
        assert_eq!(of(&[held(&me, false), held(&me, true)]), Ownership::Ours { running: true });
        assert_eq!(of(&[held(&me, false)]), Ownership::Ours { running: false });
        // One foreign object is enough (a network of A's under B's containers: the state the bug left).
        assert_eq!(of(&[held(&me, true), held(&other_folder, false)]), Ownership::Theirs(Some(other_folder.clone())));
        assert_eq!(of(&[held(&other_user, true)]), Ownership::Theirs(Some(other_user.clone())));
        assert_eq!(of(&[Held { owner: None, running: false }]), Ownership::Theirs(None));

        assert_eq!(of(&[]).for_up("dev", &me), Ok(false));
        assert_eq!(of(&[held(&me, false)]).for_up("dev", &me), Ok(true), "leftovers of this folder are replaced");
        let refused = |held: &[Held]| of(held).for_up("dev", &me).unwrap_err().to_string();
        assert_eq!(
            refused(&[held(&me, true)]),
            "run 'dev' is already running from this folder: `sidecarctl down dev` ends it first, or choose another \
             --name"
        );
        assert_eq!(
            refused(&[held(&other_folder, false)]),
            "run name 'dev' is taken by a run started from /src/a: choose another --name (`sidecarctl down dev` \
             there removes that run)"
        );
        assert!(refused(&[held(&other_user, true)]).contains("started by uid 0 from /src/b:"));
        assert_eq!(
            of(&[held(&other_user, true)]).for_up("dev", &me),
            Err(NameTaken::Theirs { name: "dev".into(), by: StartedBy::User { uid: 0, workspace: "/src/b".into() } }),
            "the refusal says whose the run is as data, not only as text"
        );
        assert_eq!(
            of(&[held(&other_folder, true)]).for_down("dev", &me, false),
            Err(NotRemovable::Theirs { name: "dev".into(), by: StartedBy::Folder("/src/a".into()) })
        );
        assert!(refused(&[Held { owner: None, running: true }]).contains("without owner labels"));
        for text in [refused(&[held(&me, true)]), refused(&[held(&other_folder, true)])] {
            assert_eq!(text.lines().count(), 1, "{text}");
        }

        assert_eq!(of(&[held(&me, true)]).for_down("dev", &me, false), Ok(()));
        assert_eq!(of(&[Held { owner: None, running: true }]).for_down("dev", &me, false), Ok(()));
        assert_eq!(of(&[held(&other_folder, true)]).for_down("dev", &me, true), Ok(()), "--all");
        assert_eq!(
            of(&[held(&other_folder, true)]).for_down("dev", &me, false).unwrap_err().to_string(),
            "run 'dev' was started from /src/a, not from here: `sidecarctl down dev` there removes it, or \
             `sidecarctl down --all dev` from anywhere"
        );
        assert_eq!(
            of(&[]).for_down("nosuch", &me, true).unwrap_err().to_string(),
            "no run 'nosuch' on this engine (`sidecarctl ps` lists the runs)"
        );
    }
}
