//! `sidecarctl ps`: every run on this engine, its agent and its builders, each with its state and, for a running
//! builder, its health — from the engine when it runs HEALTHCHECKs, else by running the health command (as the
//! gate does) — and whose run it is: the uid that started it and its folder (a run's name is theirs).

use std::collections::BTreeMap;

use crate::engine::{ContainerEngine, EngineError};
use crate::gate::{engine_verdict, health_command, EngineVerdict, HealthSource};
use crate::names::{LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, LABEL_RUN, LABEL_RUNTIME, LABEL_WORKSPACE, ROLE_BUILDER};
use crate::plan::HEALTH_TIMEOUT;

/// One line of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub run: String,
    pub container: String,
    pub role: String,
    pub runtime: String,
    pub state: String,
    pub health: String,
    /// The uid that started the run, and its folder ("-" for a run made before these labels existed).
    pub owner: String,
    pub folder: String,
}

pub async fn rows(engine: &ContainerEngine) -> Result<Vec<Row>, EngineError> {
    let mut rows = Vec::new();
    for summary in engine.containers(&[format!("{LABEL_MANAGED}=true")]).await? {
        let labels = summary.labels.clone().unwrap_or_default();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let or_dash = |k: &str| labels.get(k).cloned().unwrap_or_else(|| "-".to_owned());
        let container = summary
            .names
            .as_ref()
            .and_then(|n| n.first())
            .map(|n| n.trim_start_matches('/').to_owned())
            .unwrap_or_default();
        let state = summary.state.map(|s| s.to_string()).unwrap_or_default();
        let health = if label(LABEL_ROLE) == ROLE_BUILDER && state == "running" {
            health(engine, &container).await
        } else {
            "-".to_owned()
        };
        rows.push(Row {
            run: label(LABEL_RUN),
            container,
            role: label(LABEL_ROLE),
            runtime: label(LABEL_RUNTIME),
            state,
            health,
            owner: or_dash(LABEL_OWNER),
            folder: or_dash(LABEL_WORKSPACE),
        });
    }
    rows.sort_by(|a, b| (&a.run, &a.role, &a.runtime).cmp(&(&b.run, &b.role, &b.runtime)));
    Ok(rows)
}

/// `healthy (engine)` when the engine's own HEALTHCHECK says so, else what the health command says through exec
/// (`healthy (probe)`, `unhealthy (probe)`), as the gate checks: the two can disagree, so the listing names its
/// source. The command is the container's own health check: the image's, or the profile's override, which `up`
/// writes into the container (so a run's `ps` probes what its gate probed).
async fn health(engine: &ContainerEngine, container: &str) -> String {
    let Ok(inspected) = engine.inspect(container).await else { return "unknown".into() };
    if engine_verdict(&inspected.state.unwrap_or_default()) == EngineVerdict::Healthy {
        return format!("healthy ({})", HealthSource::Engine);
    }
    let command = health_command(None, inspected.config.and_then(|c| c.healthcheck).as_ref());
    match tokio::time::timeout(HEALTH_TIMEOUT, engine.exec(container, command)).await {
        Ok(Ok(probe)) if probe.exit_code == Some(0) => format!("healthy ({})", HealthSource::Probe),
        Ok(Ok(_)) => format!("unhealthy ({})", HealthSource::Probe),
        _ => "unknown".into(),
    }
}

/// The listing as aligned text, one container a line, grouped by run.
pub fn render(rows: &[Row]) -> String {
    let header = Row {
        run: "RUN".into(),
        container: "CONTAINER".into(),
        role: "ROLE".into(),
        runtime: "RUNTIME".into(),
        state: "STATE".into(),
        health: "HEALTH".into(),
        owner: "OWNER".into(),
        folder: "FOLDER".into(),
    };
    let all: Vec<&Row> = std::iter::once(&header).chain(rows).collect();
    let cells = |r: &'_ Row| {
        [
            r.run.clone(),
            r.container.clone(),
            r.role.clone(),
            r.runtime.clone(),
            r.state.clone(),
            r.health.clone(),
            r.owner.clone(),
        ]
    };
    let mut widths = [0usize; 7];
    for r in &all {
        for (w, cell) in widths.iter_mut().zip(cells(r)) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for r in all {
        for (cell, w) in cells(r).iter().zip(widths) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(&r.folder);
        out.push('\n');
    }
    out
}

/// Runs per id, for `down` without an id and for tests.
pub fn by_run(rows: &[Row]) -> BTreeMap<&str, Vec<&Row>> {
    let mut map: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for row in rows {
        map.entry(row.run.as_str()).or_default().push(row);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each line names whose run it is: the uid and the folder, the folder last (the one cell of any length).
    #[test]
    fn the_listing_names_the_owner_and_the_folder() {
        let row = |run: &str, health: &str, owner: &str, folder: &str| Row {
            run: run.into(),
            container: format!("sidecarctl-{run}-builder-python"),
            role: "build-sidecar".into(),
            runtime: "python".into(),
            state: "running".into(),
            health: health.into(),
            owner: owner.into(),
            folder: folder.into(),
        };
        let text = render(&[row("dev", "healthy (probe)", "1000", "/src/a"), row("old", "-", "-", "-")]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "RUN  CONTAINER                      ROLE           RUNTIME  STATE    HEALTH           OWNER  FOLDER",
                "dev  sidecarctl-dev-builder-python  build-sidecar  python   running  healthy (probe)  1000   /src/a",
                "old  sidecarctl-old-builder-python  build-sidecar  python   running  -                -      -",
            ]
        );
    }
}
