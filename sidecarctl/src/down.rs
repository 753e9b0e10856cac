//! Teardown, by label: the agent first (stop: SIGTERM, grace, SIGKILL), then the builders (the same, together),
//! then the network, then the token folder. Used by `up` on every exit path and by `down`. Named cache volumes
//! are never removed: they are what keeps the next build fast.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;

use crate::engine::{run_filter, ContainerEngine, EngineError};
use crate::names::{Held, RunOwner, LABEL_MANAGED, LABEL_ROLE, LABEL_RUN, LABEL_TOKEN_DIR, ROLE_AGENT};
use crate::token;

/// What a teardown removed, for the progress line and the tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
}

/// "2 containers, 1 network", "1 container, no network": what went, counted in words.
impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = |n: usize, one: &str| match n {
            0 => format!("no {one}"),
            1 => format!("1 {one}"),
            n => format!("{n} {one}s"),
        };
        write!(f, "{}, {}", count(self.containers, "container"), count(self.networks, "network"))
    }
}

/// Every object labelled with run `run`: who made it and whether it runs, for [`crate::names::Ownership`].
pub async fn held(engine: &ContainerEngine, run: &str) -> Result<Vec<Held>, EngineError> {
    let filter = [run_filter(run)];
    let mut held: Vec<Held> = engine
        .containers(&filter)
        .await?
        .into_iter()
        .map(|c| Held {
            owner: c.labels.as_ref().and_then(RunOwner::of_labels),
            running: c.state.is_some_and(|s| s.to_string() == "running"),
        })
        .collect();
    for (_, labels) in engine.labelled_networks(&filter).await? {
        held.push(Held { owner: RunOwner::of_labels(&labels), running: false });
    }
    Ok(held)
}

/// Removes everything labelled with run `run`, its token folder included.
pub async fn remove_run(engine: &ContainerEngine, run: &str, grace: Duration) -> Result<Removed, EngineError> {
    let (removed, token_dirs) = remove_labelled(engine, run, grace).await?;
    // The token folder: only one of ours (a label is data anyone who can reach the engine can set).
    if let Ok(root) = token::state_root() {
        for dir in token_dirs {
            let dir = Path::new(&dir);
            if dir.parent() == Some(root.as_path()) && dir.file_name().and_then(|n| n.to_str()) == Some(run) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    Ok(removed)
}

/// Removes the run's containers and network, and leaves its token folder (`up` retrying a run keeps it).
pub async fn remove_objects(engine: &ContainerEngine, run: &str, grace: Duration) -> Result<Removed, EngineError> {
    Ok(remove_labelled(engine, run, grace).await?.0)
}

/// Removes the containers and networks labelled with run `run`; returns what went and the token folders their
/// labels name.
async fn remove_labelled(
    engine: &ContainerEngine,
    run: &str,
    grace: Duration,
) -> Result<(Removed, BTreeSet<String>), EngineError> {
    let filter = [run_filter(run)];
    let containers = engine.containers(&filter).await?;
    let name_of = |c: &bollard::models::ContainerSummary| {
        c.names.as_ref().and_then(|n| n.first()).map(|n| n.trim_start_matches('/').to_owned()).or(c.id.clone())
    };
    let role = |c: &bollard::models::ContainerSummary| c.labels.as_ref().and_then(|l| l.get(LABEL_ROLE)).cloned();
    let (agents, others): (Vec<_>, Vec<_>) = containers.iter().partition(|c| role(c).as_deref() == Some(ROLE_AGENT));
    for agent in agents.iter().filter_map(|c| name_of(c)) {
        engine.stop(&agent, grace).await?;
        engine.remove(&agent).await?;
    }
    let builders: Vec<String> = others.iter().filter_map(|c| name_of(c)).collect();
    for result in join_all(builders.iter().map(|name| async move {
        engine.stop(name, grace).await?;
        engine.remove(name).await
    }))
    .await
    {
        result?;
    }
    let networks = engine.networks(&filter).await?;
    for network in &networks {
        engine.remove_network(network).await?;
    }
    let dirs: BTreeSet<String> =
        containers.iter().filter_map(|c| c.labels.as_ref().and_then(|l| l.get(LABEL_TOKEN_DIR)).cloned()).collect();
    Ok((Removed { containers: containers.len(), networks: networks.len() }, dirs))
}

/// Which runs a `down` without a run name removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `--all`: every run on the engine, whoever started it.
    All,
    /// The runs this user started from this workspace (as `docker compose down` removes only its project).
    Owner(RunOwner),
}

/// The names of the runs in `scope` that have a container or a network on this engine.
pub async fn runs(engine: &ContainerEngine, scope: &Scope) -> Result<Vec<String>, EngineError> {
    let mut filters = vec![format!("{LABEL_MANAGED}=true")];
    if let Scope::Owner(owner) = scope {
        filters.extend(owner.filters());
    }
    let mut runs: BTreeSet<String> = engine
        .containers(&filters)
        .await?
        .into_iter()
        .filter_map(|c| c.labels.and_then(|mut l| l.remove(LABEL_RUN)))
        .collect();
    // A network left without containers (a run killed between the two) is still a run to remove.
    for network in engine.networks(&filters).await? {
        if let Some(run) = network.strip_prefix("sidecarctl-") {
            runs.insert(run.to_owned());
        }
    }
    Ok(runs.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::Removed;

    #[test]
    fn what_went_is_counted_in_words() {
        let removed = |containers, networks| Removed { containers, networks }.to_string();
        assert_eq!(removed(2, 1), "2 containers, 1 network");
        assert_eq!(removed(1, 0), "1 container, no network");
        assert_eq!(removed(0, 2), "no container, 2 networks");
    }
}
