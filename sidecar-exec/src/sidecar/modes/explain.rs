//! `--explain` and SIDECAR_VERBOSE=1: what a forwarded call sends, before it is sent.
//! Variable values are shown only for the default allowlist: a passthrough value may be a secret.

use std::fmt::Write;

use crate::sidecar::config::settings::CallSettings;
use crate::sidecar::config::sidecars::Endpoint;
use crate::sidecar::stdin::source::StdinSource;
use crate::terminal_safe::terminal_safe;

/// The lines, each starting `sidecar-exec:`.
pub fn explain(target: &Endpoint, settings: &CallSettings, stdin: StdinSource, program: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "sidecar-exec: {} runs on the {} sidecar at {} (cwd {}, timeout {} s)",
        terminal_safe(program),
        target.runtime,
        target.url,
        terminal_safe(&settings.cwd),
        settings.timeout_secs
    );
    let stdin = match stdin {
        StdinSource::Nothing => "not streamed (/dev/null, or inline in the request)",
        StdinSource::Stream => "streamed (a pipe or terminal)",
        StdinSource::File { .. } => "streamed from a regular file (its offset left where the command stopped)",
    };
    let _ = writeln!(text, "sidecar-exec: output: {}; stdin: {stdin}", settings.mode.describe());
    let mut names = Vec::new();
    for (name, value) in &settings.env {
        names.push(match settings.env_defaults.contains(name) {
            true => format!("{name}={}", terminal_safe(value)),
            false => format!("{name} (SIDECAR_ENV_PASSTHROUGH)"),
        });
    }
    let sent = if names.is_empty() { "none".to_owned() } else { names.join(" ") };
    let _ = writeln!(text, "sidecar-exec: variables sent: {sent}");
    text
}
