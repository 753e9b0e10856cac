//! What the engine is asked to create, as plain data built from the `Run`: the builders' and the agent's
//! container bodies. No I/O here, so every field the issue lists is checked by unit tests.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, EndpointSettings, HostConfig, NetworkingConfig, ResourcesUlimits};

use crate::model::{Run, Sidecar};
use crate::names::{RunName, LABEL_TOKEN_DIR, ROLE_AGENT, ROLE_BUILDER};
use crate::token;

/// What a container needs beyond the run: who the caller is and where its token file is on the host.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub run: &'a Run,
    pub id: &'a RunName,
    /// `uid:gid` of the caller.
    pub caller: String,
    /// The token folder (label for `down`), if the run has a token.
    pub token_dir: Option<String>,
}

/// `HOME` of a builder that runs as the caller: the image's home belongs to another uid, so a folder in the
/// workspace (which the caller owns) is the one place the caller's tools can always write.
pub fn caller_home(sidecar: &Sidecar) -> String {
    format!("{}/.sidecarctl/home/{}", sidecar.workspace_target.trim_end_matches('/'), sidecar.runtime)
}

/// The images' builder group (`BUILDER_GID` of images/Dockerfile), added to every builder that runs as the caller:
/// the images share cache volumes between uids through it (cache folders setgid to it, commands under umask 0002),
/// so folders another uid created in a cache volume stay writable (docs/images.md, "Caches and uids").
pub const BUILDER_GROUP: &str = "1000";

/// The builder container: `exec-server -port P -cwd W` (or the profile's command), the workspace bind and cache
/// volumes, the caller's uid with the builder group, every capability dropped, no new privileges, no restart policy, no published port,
/// and only the network alias `builder-RT` on the run's private network.
pub fn builder(ctx: &Context<'_>, sidecar: &Sidecar, token_file: Option<&str>) -> ContainerCreateBody {
    let mut env: Vec<String> = sidecar.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push(format!("EXEC_SERVER_PORT={}", sidecar.port));
    if sidecar.run_as_caller_uid {
        env.push(format!("HOME={}", caller_home(sidecar)));
    }
    let mut binds: Vec<String> = ctx.run.workspace_volume(sidecar).map(|v| v.bind()).into_iter().collect();
    binds.extend(sidecar.cache_volumes.iter().cloned());
    if let Some(file) = token_file {
        env.push(format!("EXEC_SERVER_TOKEN_FILE={}", token::CONTAINER_PATH));
        binds.push(format!("{file}:{}:ro", token::CONTAINER_PATH));
    }
    ContainerCreateBody {
        image: Some(sidecar.image.clone()),
        cmd: Some(sidecar.command.clone()),
        env: Some(env),
        user: sidecar.run_as_caller_uid.then(|| ctx.caller.clone()),
        labels: Some(labels(ctx, ROLE_BUILDER, Some(sidecar))),
        host_config: Some(HostConfig {
            group_add: sidecar.run_as_caller_uid.then(|| vec![BUILDER_GROUP.to_owned()]),
            ..host_config(ctx, binds)
        }),
        networking_config: Some(network(ctx, Some(sidecar.runtime.alias()))),
        ..Default::default()
    }
}

/// How the agent is started: its image and command, and how it meets our terminal.
#[derive(Debug, Clone, Default)]
pub struct AgentSpec {
    pub image: String,
    pub cmd: Vec<String>,
    /// `--agent-user`; `None` keeps the image's user.
    pub user: Option<String>,
    /// `NAME=VALUE` pairs (`-e`).
    pub env: Vec<String>,
    pub tty: bool,
    pub stdin: bool,
}

/// The agent container: the run's network and volumes, `BUILD_SIDECARS` (the contract's shape),
/// `SIDECAR_ENV_PASSTHROUGH`, the token, labels; hardened like the builders.
pub fn agent(ctx: &Context<'_>, spec: &AgentSpec, token_file: Option<&str>) -> ContainerCreateBody {
    let run = ctx.run;
    let mut env = spec.env.clone();
    if !run.sidecars.is_empty() {
        env.push(format!("BUILD_SIDECARS={}", run.build_sidecars_json(Sidecar::internal_url)));
    }
    let passthrough = run.env_passthrough();
    if !passthrough.is_empty() {
        env.push(format!("SIDECAR_ENV_PASSTHROUGH={passthrough}"));
    }
    let mut binds: Vec<String> = run.volumes.iter().map(|v| v.bind()).collect();
    if let Some(file) = token_file {
        env.push(format!("SIDECAR_TOKEN_FILE={}", token::CONTAINER_PATH));
        binds.push(format!("{file}:{}:ro", token::CONTAINER_PATH));
    }
    let workdir = run.sidecars.first().map(|s| s.workspace_target.clone()).or_else(|| {
        run.volumes.iter().find(|v| v.source == run.workspace.display().to_string()).map(|v| v.target.clone())
    });
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: (!spec.cmd.is_empty()).then(|| spec.cmd.clone()),
        env: Some(env),
        user: spec.user.clone(),
        working_dir: workdir,
        tty: Some(spec.tty),
        open_stdin: Some(spec.stdin),
        stdin_once: Some(spec.stdin),
        attach_stdin: Some(spec.stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        labels: Some(labels(ctx, ROLE_AGENT, None)),
        host_config: Some(host_config(ctx, binds)),
        networking_config: Some(network(ctx, None)),
        ..Default::default()
    }
}

fn labels(ctx: &Context<'_>, role: &str, sidecar: Option<&Sidecar>) -> HashMap<String, String> {
    let mut labels = ctx.id.labels(role, sidecar.map(|s| s.runtime));
    if let Some(dir) = &ctx.token_dir {
        labels.insert(LABEL_TOKEN_DIR.to_owned(), dir.clone());
    }
    labels
}

fn host_config(ctx: &Context<'_>, binds: Vec<String>) -> HostConfig {
    let ulimits = ctx
        .run
        .ulimits
        .iter()
        .map(|u| ResourcesUlimits { name: Some(u.name.clone()), soft: Some(u.soft), hard: Some(u.hard) })
        .collect::<Vec<_>>();
    HostConfig {
        binds: Some(binds),
        network_mode: Some(ctx.id.network()),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        ulimits: (!ulimits.is_empty()).then_some(ulimits),
        // No restart policy and no port bindings: nothing outside the run's network reaches a builder.
        ..Default::default()
    }
}

fn network(ctx: &Context<'_>, alias: Option<String>) -> NetworkingConfig {
    let endpoint = EndpointSettings { aliases: alias.map(|a| vec![a]), ..Default::default() };
    NetworkingConfig { endpoints_config: Some(HashMap::from([(ctx.id.network(), endpoint)])) }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
