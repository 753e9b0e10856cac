//! What the emitters share: the flags (`compose`/`kube` take `up`'s run options), the run they print, ordered YAML
//! building, the header with the command that generated the file, and the workspace as written.
//!
//! An emitted file is for another machine and another folder: the workspace is not looked up here. `--workspace`
//! is written as given (compose resolves a relative path against the compose file's folder, not ours), and the
//! file names no absolute path of this machine.

use clap::Args;
use serde_norway::{Mapping, Value};

use super::yaml::NotRoundTrip;
use crate::exit::EXIT_FAILED;
use crate::model::{ModelError, RunConfig, WorkspaceLookup};
use crate::options::RunOptions;
use crate::plan::{AgentRequest, Plan, Role};
use crate::runtime::Runtime;

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
    /// The run to print: `--workspace` is not looked up (the file names it as written).
    pub fn run(&self) -> Result<RunConfig, ModelError> {
        RunConfig::from_options(&self.run, WorkspaceLookup::AsWritten)
    }

    /// The agent as the command line gives it (an emitted file keeps the image's user and sets no more variables).
    pub fn agent_request(&self) -> AgentRequest {
        AgentRequest {
            image: self.agent_image().to_owned(),
            command: self.agent_command().to_vec(),
            ..Default::default()
        }
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
pub fn main(mut options: EmitOptions, emit: impl Fn(&RunConfig, &EmitOptions) -> Result<String, NotRoundTrip>) -> i32 {
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
pub fn build_commands(plan: &Plan) -> Vec<String> {
    let mut lines: Vec<String> = plan
        .builders
        .iter()
        .filter_map(|c| match c.role {
            Role::Builder(rt) if c.image == rt.default_image() => Some(format!(
                "docker build -f images/Dockerfile --target builder --build-arg RUNTIME={rt} -t sidecar-builder-{rt} ."
            )),
            _ => None,
        })
        .collect();
    if matches!(plan.agent.image.as_str(), "sidecar-agent" | "sidecar-agent:latest") {
        lines.push(
            "docker build -f images/Dockerfile --target agent -t sidecar-agent \\\n    --build-arg AGENT_UID=\"$(id -u)\" \
             --build-arg AGENT_GID=\"$(id -g)\" ."
                .to_owned(),
        );
    }
    lines
}
