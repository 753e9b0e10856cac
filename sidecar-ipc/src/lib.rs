//! sidecar-ipc: orchestrator sidecars over the shared /ipc folder. The binary (`main.rs`) parses the command line
//! ([`cli`]) and runs [`execute`] on a one-thread runtime; the folder layout ([`ipc::Ipc`]) is public, so tests and
//! other tools name the protocol's files the way the subcommands do.
//!
//! - The subcommands, one module each: `prompt`, `clear` (`clear-context`), `finish`, `run` (the orchestrator's
//!   supervisor), `server` (`prompt-server`: the agent's side, with its backends, history and audit log) and
//!   `run_config` (`config`).
//! - What they share: the folder ([`ipc`]) and its files' JSON (`wire`), waiting for it to change (`changes`, on
//!   agent-files' rules), prompts still in flight (`inflight`), request ids (`ids`), answer schemas (`schema`),
//!   `FILE|JSON` arguments (`json_arg`), and how a subcommand fails ([`exit`]).

mod changes;
mod clear;
pub mod cli;
pub mod exit;
mod finish;
mod ids;
mod inflight;
pub mod ipc;
mod json_arg;
mod prompt;
mod run;
mod run_config;
mod schema;
mod server;
mod wire;

use cli::Command;
use exit::ExitError;
use ipc::Ipc;

/// Runs one subcommand on the IPC folder `ipc` and returns the process's exit code (a failure is reported on
/// stderr first).
pub async fn execute(ipc: &Ipc, command: Command) -> i32 {
    let outcome = match command {
        Command::Prompt(args) => {
            prompt::prompt(ipc, prompt::PromptArgs { text: args.text, schema: args.schema, timeout: args.timeout })
                .await
        }
        Command::ClearContext(args) => clear::clear_context(ipc, args.reason).await,
        Command::Finish(args) => finish::finish(ipc, args.result.as_deref(), args.drain).await,
        Command::Run(args) => {
            let args =
                run::RunArgs { command: args.command, timeout: args.timeout, grace: args.grace, drain: args.drain };
            return run::run(ipc, args).await;
        }
        Command::PromptServer(args) => {
            let backend = match (args.openai_url, args.replay) {
                (Some(url), _) => server::BackendArgs::OpenAi {
                    url,
                    model: args.model.unwrap_or_default(),
                    key_var: args.api_key_env,
                    timeout: args.request_timeout,
                },
                (None, Some(path)) => server::BackendArgs::Replay(path),
                (None, None) => {
                    return ExitError::usage("give --openai-url URL --model NAME, or --replay FILE").report()
                }
            };
            let use_context = std::env::var("USE_CONTEXT").ok();
            server::serve(ipc, server::ServerArgs { backend, audit: args.audit, system: args.system, use_context })
                .await
        }
        Command::Config(args) => {
            run_config::print_config(args.key.as_deref(), args.default.as_deref()).map_err(ExitError::from)
        }
    };
    match outcome {
        Ok(()) => 0,
        Err(err) => err.report(),
    }
}
