//! Teardown, by label: the agent first (stop: SIGTERM, grace, SIGKILL), then the builders (the same, together),
//! then the network, then the token folder. Used by `up` on every exit path and by `down`. Named cache volumes
//! are never removed: they are what keeps the next build fast.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;

use crate::engine::{run_filter, ContainerEngine, EngineError};
use crate::names::{Origin, LABEL_MANAGED, LABEL_ROLE, LABEL_RUN, LABEL_TOKEN_DIR, ROLE_AGENT};
use crate::token;

/// What a teardown removed, for the progress line and the tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub containers: usize,
    pub networks: usize,
}

/// Removes everything labelled with run `run`.
pub async fn remove_run(engine: &ContainerEngine, run: &str, grace: Duration) -> Result<Removed, EngineError> {
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
    // The token folder: only one of ours (a label is data anyone who can reach the engine can set).
    let dirs: BTreeSet<String> =
        containers.iter().filter_map(|c| c.labels.as_ref().and_then(|l| l.get(LABEL_TOKEN_DIR)).cloned()).collect();
    if let Ok(root) = token::state_root() {
        for dir in dirs {
            let dir = Path::new(&dir);
            if dir.parent() == Some(root.as_path()) && dir.file_name().and_then(|n| n.to_str()) == Some(run) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    Ok(Removed { containers: containers.len(), networks: networks.len() })
}

/// Which runs a `down` without a run name removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `--all`: every run on the engine, whoever started it.
    All,
    /// The runs this user started from this workspace (as `docker compose down` removes only its project).
    Origin(Origin),
}

/// The names of the runs in `scope` that have a container or a network on this engine.
pub async fn runs(engine: &ContainerEngine, scope: &Scope) -> Result<Vec<String>, EngineError> {
    let mut filters = vec![format!("{LABEL_MANAGED}=true")];
    if let Scope::Origin(origin) = scope {
        filters.extend(origin.filters());
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
