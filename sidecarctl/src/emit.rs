//! What the emitters share: the flags (`compose`/`kube` take `up`'s run options), the run they print, ordered YAML
//! building, the header with the command that generated the file, and the workspace as written.
//!
//! An emitted file is for another machine and another folder: the workspace is not looked up here. `--workspace`
//! is written as given (compose resolves a relative path against the compose file's folder, not ours), and the
//! file names no absolute path of this machine.

use clap::Args;
use serde_norway::{Mapping, Value};

use crate::model::{ModelError, Run, Sidecar, Volume};
use crate::options::RunOptions;
use crate::runtime::Runtime;
use crate::up::EXIT_FAILED;
use crate::yaml::NotRoundTrip;

#[derive(Args, Debug, Clone)]
pub struct EmitOptions {
    #[command(flatten)]
    pub run: RunOptions,

    /// The agent's image, then its command.
    #[arg(required = true, trailing_var_arg = true, value_name = "AGENT_IMAGE [CMD]...")]
    pub agent: Vec<String>,

    /// The arguments after `sidecarctl` (the generator command quoted in the header).
    #[arg(skip)]
    pub command_line: Vec<String>,
}

impl EmitOptions {
    /// The run to print. The workspace is resolved as the current folder, which always exists; the emitters write
    /// `--workspace` as given wherever the run has the workspace (see `bind_source`).
    pub fn run(&self) -> Result<Run, ModelError> {
        let mut options = self.run.clone();
        options.workspace = None;
        Run::from_options(&options)
    }

    /// `sidecarctl ARGS…`, quoted for a POSIX shell.
    pub fn generator(&self) -> String {
        std::iter::once("sidecarctl".to_owned())
            .chain(self.command_line.iter().map(|a| protocol::shell::word(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn agent_image(&self) -> &str {
        &self.agent[0]
    }

    pub fn agent_command(&self) -> &[String] {
        &self.agent[1..]
    }
}

/// `sidecarctl compose|kube`: the run from the options, printed by `emit`; exit code 125 on an invalid run.
pub fn main(mut options: EmitOptions, emit: fn(&Run, &EmitOptions) -> Result<String, NotRoundTrip>) -> i32 {
    options.command_line = std::env::args().skip(1).collect();
    let run = match options.run() {
        Ok(run) => run,
        Err(e) => {
            eprintln!("sidecarctl: error: {e}");
            return EXIT_FAILED;
        }
    };
    for warning in &run.warnings {
        eprintln!("sidecarctl: warning: {warning}");
    }
    match emit(&run, &options) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("sidecarctl: error: {e}");
            EXIT_FAILED
        }
    }
}

/// A mapping in the order given (YAML readers see keys as written); `Value::Null` values are left out.
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

/// A volume's source in an emitted file: `workspace` (the caller's text, e.g. `${WORKSPACE:-./workspace}`) for
/// the workspace, and for anything under it, relative to it; other sources as the profile gives them.
pub fn bind_source(run: &Run, options: &RunOptions, volume: &Volume, workspace: &str) -> String {
    let here = run.workspace.display().to_string();
    let is_workspace_bind = run.sidecars.iter().any(|s| s.workspace_target == volume.target);
    if volume.source == here || (options.workspace.is_some() && is_workspace_bind) {
        workspace.to_owned()
    } else if let Some(rest) = volume.source.strip_prefix(&format!("{here}/")) {
        format!("{workspace}/{rest}")
    } else {
        volume.source.clone()
    }
}

/// Probe tries allowed within `ready_timeout` at one try per 2 s (at least one).
pub fn retries(sidecar: &Sidecar) -> u64 {
    ((sidecar.ready_timeout / 2.0).ceil() as u64).max(1)
}

/// The health test in compose form: the profile's, else the images' own (`exec-server -healthcheck`).
pub fn health_test(sidecar: &Sidecar) -> Vec<String> {
    sidecar.healthcheck.clone().unwrap_or_else(|| vec!["CMD".into(), "exec-server".into(), "-healthcheck".into()])
}

/// Named cache volumes, each once, in the order the sidecars give them (host paths are binds, not volumes).
pub fn named_volumes(run: &Run) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for sidecar in &run.sidecars {
        for cache in &sidecar.cache_volumes {
            if let Some((name, _)) = cache.split_once(':') {
                if !name.starts_with('/') && !name.starts_with('.') && !names.iter().any(|n| n == name) {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

/// `# line` for each line (`#` alone for an empty one).
pub fn comment_block(text: &str) -> String {
    text.lines().map(|line| if line.is_empty() { "#\n".to_owned() } else { format!("# {line}\n") }).collect()
}

/// A command that shows a runtime's tool answers through its wrapper, for the headers' "try it" line.
pub fn version_command(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Node => "npm --version",
        Runtime::Python => "python3 --version",
        Runtime::Java => "java -version",
        Runtime::Go => "go version",
        Runtime::Rust => "cargo --version",
    }
}

/// The `docker build` lines for the images this project's images/Dockerfile makes under their default names
/// (`sidecar-builder-RT:latest`, `sidecar-agent`): a run of other images says only that they must exist.
pub fn build_commands(run: &Run, agent_image: &str) -> Vec<String> {
    let mut lines: Vec<String> = run
        .sidecars
        .iter()
        .filter(|sc| sc.image == sc.runtime.default_image())
        .map(|sc| {
            format!(
                "docker build -f images/Dockerfile --target builder --build-arg RUNTIME={rt} -t sidecar-builder-{rt} .",
                rt = sc.runtime
            )
        })
        .collect();
    if matches!(agent_image, "sidecar-agent" | "sidecar-agent:latest") {
        lines.push(
            "docker build -f images/Dockerfile --target agent -t sidecar-agent \\\n    --build-arg AGENT_UID=\"$(id -u)\" \
             --build-arg AGENT_GID=\"$(id -g)\" ."
                .to_owned(),
        );
    }
    lines
}
