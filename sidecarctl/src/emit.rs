//! What the emitters share: the flags (`compose`/`kube` take `up`'s run options), ordered YAML building, and the
//! workspace as written (an emitted file must not carry this machine's absolute paths).

use clap::Args;
use serde_norway::{Mapping, Value};

use crate::model::{Run, Sidecar};
use crate::options::RunOptions;

#[derive(Args, Debug, Clone)]
pub struct EmitOptions {
    #[command(flatten)]
    pub run: RunOptions,

    /// The agent's image, then its command.
    #[arg(required = true, trailing_var_arg = true, value_name = "AGENT_IMAGE [CMD]...")]
    pub agent: Vec<String>,
}

/// A mapping in the order given (YAML readers see keys as written).
pub fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut mapping = Mapping::new();
    for (key, value) in entries {
        if !value.is_null() {
            mapping.insert(Value::String(key.to_owned()), value);
        }
    }
    Value::Mapping(mapping)
}

pub fn s(text: impl Into<String>) -> Value {
    Value::String(text.into())
}

pub fn list<T: Into<Value>>(items: impl IntoIterator<Item = T>) -> Value {
    Value::Sequence(items.into_iter().map(Into::into).collect())
}

pub fn strings<'a>(items: impl IntoIterator<Item = &'a String>) -> Value {
    list(items.into_iter().map(|i| s(i.clone())))
}

/// `Some(v)` as `v`, `None` as an omitted key.
pub fn opt(value: Option<Value>) -> Value {
    value.unwrap_or(Value::Null)
}

/// The workspace source as the user wrote it (`--workspace`), else `.`: the emitted file is for any machine.
pub fn workspace_text(options: &RunOptions) -> String {
    options.workspace.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| ".".to_owned())
}

/// Probe tries allowed within `ready_timeout` at one try per 2 s (at least one).
pub fn retries(sidecar: &Sidecar) -> u64 {
    ((sidecar.ready_timeout / 2.0).ceil() as u64).max(1)
}

/// The health test in compose form: the profile's, else the images' own (`exec-server -healthcheck`).
pub fn health_test(sidecar: &Sidecar) -> Vec<String> {
    sidecar.healthcheck.clone().unwrap_or_else(|| vec!["CMD".into(), "exec-server".into(), "-healthcheck".into()])
}

pub fn yaml(header: &str, document: &Value) -> String {
    let body = serde_norway::to_string(document).expect("a Value always serialises");
    format!("{header}{body}")
}

/// Unused volumes/keys are dropped: an emitted file holds only what the run uses.
pub fn named_volumes(run: &Run) -> Vec<String> {
    let mut names: Vec<String> = run
        .sidecars
        .iter()
        .flat_map(|s| s.cache_volumes.iter())
        .filter_map(|v| v.split_once(':').map(|(name, _)| name.to_owned()))
        .filter(|name| !name.starts_with('/') && !name.starts_with('.'))
        .collect();
    names.dedup();
    names
}
