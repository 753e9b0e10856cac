//! `sidecarctl logs RUN [RT]`: the builder's output (or, without RT, every container of the run, each under a
//! `==> name <==` header on stderr), streamed from the engine: stdout to stdout, stderr to stderr.

use std::io::Write;

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptionsBuilder;
use futures_util::StreamExt;

use crate::engine::{run_filter, ContainerEngine, EngineError};
use crate::names::LABEL_RUNTIME;

pub async fn logs(
    engine: &ContainerEngine,
    run: &str,
    runtime: Option<&str>,
    follow: bool,
) -> Result<usize, EngineError> {
    let mut filter = vec![run_filter(run)];
    if let Some(rt) = runtime {
        filter.push(format!("{LABEL_RUNTIME}={rt}"));
    }
    let containers = engine.containers(&filter).await?;
    let several = containers.len() > 1;
    for container in &containers {
        let name = container.names.as_ref().and_then(|n| n.first()).map(|n| n.trim_start_matches('/')).unwrap_or("?");
        if several {
            eprintln!("==> {name} <==");
        }
        let options = LogsOptionsBuilder::default().stdout(true).stderr(true).follow(follow && !several).build();
        let mut stream = engine.docker().logs(name, Some(options));
        while let Some(chunk) = stream.next().await {
            match chunk.map_err(|error| EngineError::Api { what: format!("reading the logs of {name}"), error })? {
                LogOutput::StdErr { message } => std::io::stderr().write_all(&message),
                other => std::io::stdout().write_all(&other.into_bytes()),
            }
            .ok();
        }
    }
    Ok(containers.len())
}
