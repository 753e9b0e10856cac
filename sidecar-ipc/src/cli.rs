//! The command line: subcommands, flags and their environment twins. Doc comments here are the `--help` text.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Orchestrator sidecars over the shared /ipc folder, from any language.
///
/// The orchestrator side: `prompt` asks the LLM through the agent and prints the answer, `clear-context` makes it
/// forget, `finish` ends the run, and `run` supervises the orchestrator so that the run always ends properly. The
/// agent side, for local runs and tests: `prompt-server` answers prompts from an OpenAI-compatible endpoint or from
/// canned answers.
///
/// Exit codes: 0 success; 1 failure (with one `sidecar-ipc:` line on stderr); 2 usage; 124 a prompt timed out; `run`
/// exits with the orchestrator's status (128+N for signal N, 124 on --timeout).
#[derive(Debug, Parser)]
#[command(name = "sidecar-ipc", version, about, long_about)]
pub struct Cli {
    /// The shared IPC folder (`/ipc` in the pod); `run` passes it on to the orchestrator in SIDECAR_IPC_ROOT.
    #[arg(long, global = true, env = "SIDECAR_IPC_ROOT", default_value = "/ipc", value_name = "DIR")]
    pub ipc_root: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ask the LLM: write prompts/request-{id}.json, wait for its result, print the answer on stdout.
    ///
    /// Prints `parsed` as one line of compact JSON when a schema is given (checked against the schema here too),
    /// otherwise `content`. Exit 0 on success; 1 on an error answer, an unreadable result, or when /ipc/done appears
    /// first; 2 for bad arguments; 124 when no result comes within --timeout.
    Prompt(PromptCli),

    /// Make the agent forget the conversation so far (context/clear-{id}.json; nothing comes back).
    ///
    /// Waits 0.3 s after writing, so that the agent-runner (which polls every 150 ms and answers new prompts before
    /// it applies new clears) has applied it before the next prompt.
    ClearContext(ClearCli),

    /// End the run: write /ipc/run-result.json, then /ipc/done.
    ///
    /// Without --result, a run result already written is kept ({} if there is none). A --result that cannot be read
    /// still ends the run, with an error result and exit 1. Under `run`, only the run result is written: the
    /// supervisor writes /ipc/done once the orchestrator is gone.
    Finish(FinishCli),

    /// Supervise the orchestrator: run CMD in its own process group, and however it ends, write a run result and
    /// then /ipc/done.
    ///
    /// SYMPOZIUM_RUN_CONFIG_JSON is made a JSON object (unset, empty or null become {}; anything else is an error
    /// and the command is not started). SIGTERM, SIGINT and SIGHUP are passed on to the group; the group gets
    /// --grace to end, then SIGKILL. When the orchestrator exits, whatever it left in its group is ended the same
    /// way. The run result is the orchestrator's own if it wrote valid JSON, otherwise {"error", "phase":
    /// "orchestrator", "exitCode"}. /ipc/done comes last, after every request has its result (for up to --drain).
    /// Exits with the orchestrator's status: its code, 128+N for signal N, 124 on --timeout.
    Run(RunCli),

    /// Answer prompts like the agent-runner in prompt-server mode, for local runs and tests.
    ///
    /// Backends: --openai-url with --model (any OpenAI-compatible chat-completions endpoint), or --replay (canned
    /// answers). Keeps the conversation unless USE_CONTEXT is set to something other than true/1; clear-context
    /// empties it. Answers to a request with a schema must be JSON that matches it, else the result is an error.
    /// Logs every event as a JSON line on stderr (and to --audit). When /ipc/done appears, prints the run result on
    /// stdout and exits 0 (1 if there is none).
    PromptServer(ServerCli),

    /// Print SYMPOZIUM_RUN_CONFIG_JSON (unset or null: {}), or the value of one KEY (strings as they are, other
    /// values as JSON): for orchestrators written in shell.
    Config(ConfigCli),
}

#[derive(Debug, Args)]
pub struct PromptCli {
    /// JSON Schema the answer must match, inline (starting with `{`) or a file; a {"type": "json_schema", "name",
    /// "schema", "strict"} envelope is taken as it is.
    #[arg(long, value_name = "FILE|JSON")]
    pub schema: Option<String>,

    /// Seconds to wait for the result.
    #[arg(long, env = "SIDECAR_IPC_PROMPT_TIMEOUT", default_value = "300", value_parser = parse_seconds, value_name = "SECONDS")]
    pub timeout: Duration,

    /// The prompt; `-` or nothing reads it from stdin.
    #[arg(value_name = "TEXT | -")]
    pub text: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClearCli {
    /// Why, for the agent's log.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Debug, Args)]
pub struct FinishCli {
    /// The run's summary: inline JSON (starting with `{` or `[`), a file, or `-` for stdin.
    #[arg(long, value_name = "FILE|JSON")]
    pub result: Option<String>,

    /// Seconds to wait, before writing /ipc/done, for requests still waiting for their result.
    #[arg(long, env = "SIDECAR_IPC_DRAIN", default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub drain: Duration,
}

#[derive(Debug, Args)]
pub struct RunCli {
    /// Stop the orchestrator after this many seconds (SIGTERM to its group, --grace, SIGKILL); exit 124.
    #[arg(long, env = "SIDECAR_IPC_RUN_TIMEOUT", value_parser = parse_seconds, value_name = "SECONDS")]
    pub timeout: Option<Duration>,

    /// Seconds between SIGTERM and SIGKILL when the orchestrator's group is stopped.
    #[arg(long, env = "SIDECAR_IPC_GRACE", default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub grace: Duration,

    /// Seconds to wait, once the orchestrator is gone, for requests still waiting for their result.
    #[arg(long, env = "SIDECAR_IPC_DRAIN", default_value = "10", value_parser = parse_seconds, value_name = "SECONDS")]
    pub drain: Duration,

    /// The orchestrator and its arguments (after `--` when they start with `-`).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD", value_parser = clap::value_parser!(OsString))]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct ServerCli {
    /// An OpenAI-compatible API root (http://localhost:8080/v1) or chat-completions URL.
    #[arg(
        long,
        env = "SIDECAR_IPC_OPENAI_URL",
        value_name = "URL",
        required_unless_present = "replay",
        conflicts_with = "replay",
        requires = "model"
    )]
    pub openai_url: Option<String>,

    /// Model name sent with every request.
    #[arg(long, env = "SIDECAR_IPC_MODEL", value_name = "NAME")]
    pub model: Option<String>,

    /// Environment variable holding the API key (sent as a bearer token; unset or empty sends none).
    #[arg(long, default_value = "OPENAI_API_KEY", value_name = "VAR")]
    pub api_key_env: String,

    /// System prompt sent first with every request.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,

    /// Seconds one request to the endpoint may take.
    #[arg(long, default_value = "600", value_parser = parse_seconds, value_name = "SECONDS")]
    pub request_timeout: Duration,

    /// Canned answers, one JSON object per line (see the README); an --audit file replays as it is.
    #[arg(long, env = "SIDECAR_IPC_REPLAY", value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Append the JSON-lines log (every prompt and result) to this file too.
    #[arg(long, env = "SIDECAR_IPC_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ConfigCli {
    /// The key to print; without it, the whole object.
    pub key: Option<String>,

    /// Printed when KEY is absent (otherwise that is an error).
    #[arg(long, value_name = "VALUE")]
    pub default: Option<String>,
}

/// Seconds, up to a week (a run's timeout; [`process_group::parse_seconds`]).
fn parse_seconds(text: &str) -> Result<Duration, process_group::SecondsError> {
    process_group::parse_seconds(text, 604_800)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn run_takes_everything_after_the_command() {
        let cli = Cli::try_parse_from(["sidecar-ipc", "run", "--timeout", "5", "--", "sh", "-c", "exit 3"]).unwrap();
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert_eq!(run.command, ["sh", "-c", "exit 3"]);
        assert_eq!(run.timeout, Some(Duration::from_secs(5)));
        let cli = Cli::try_parse_from(["sidecar-ipc", "run", "python3", "-u", "orchestrator.py"]).unwrap();
        let Command::Run(run) = cli.command else { panic!("not run") };
        assert_eq!(run.command, ["python3", "-u", "orchestrator.py"]);
    }

    #[test]
    fn prompt_server_needs_exactly_one_backend() {
        assert!(Cli::try_parse_from(["sidecar-ipc", "prompt-server"]).is_err());
        assert!(Cli::try_parse_from(["sidecar-ipc", "prompt-server", "--openai-url", "http://h"]).is_err());
        assert!(
            Cli::try_parse_from(["sidecar-ipc", "prompt-server", "--replay", "a", "--openai-url", "http://h"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["sidecar-ipc", "prompt-server", "--openai-url", "http://h", "--model", "m"]).is_ok()
        );
    }
}
