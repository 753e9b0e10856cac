//! The plan as Engine API bodies: what `up` asks the engine to create, one body per planned container, plus what
//! only a running engine has (the run's labels and network, the caller's uid, the host token files, the agent's
//! terminal). No I/O here, so every field is checked by unit tests.

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{
    ContainerCreateBody, EndpointSettings, HealthConfig, HostConfig, NetworkingConfig, ResourcesUlimits,
};

use crate::engine::EngineKind;
use crate::model::{Volume, VolumeSource};
use crate::names::{RunName, RunOwner, LABEL_TOKEN_DIR, ROLE_AGENT, ROLE_BUILDER};
use crate::plan::{BuilderHealth, Container, Plan, Role, User, HEALTH_INTERVAL, HEALTH_TIMEOUT};

/// What a body needs beyond the plan.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// Docker and Podman take different tmpfs options.
    pub engine: EngineKind,
    pub plan: &'a Plan,
    pub name: &'a RunName,
    /// Who starts the run, from where (labels).
    pub owner: &'a RunOwner,
    /// The workspace folder on this machine.
    pub workspace: &'a Path,
    /// `uid:gid` of the caller.
    pub caller: String,
    /// The token folder (label for `down`), if the run has a token.
    pub token_dir: Option<String>,
}

/// How the agent meets our terminal (builders are never attached).
#[derive(Debug, Clone, Copy, Default)]
pub struct Attach {
    pub tty: bool,
    pub stdin: bool,
}

/// The container body: the plan's image, command, user, groups, working folder, environment, binds (the token
/// file `token_file` at the plan's token path, read-only) and a profile's health command, the run's labels and
/// network (a builder with its alias `builder-RT`), every capability dropped, no new privileges, no restart policy
/// and no published port.
pub fn body(
    ctx: &Context<'_>,
    container: &Container,
    token_file: Option<&Path>,
    attach: Option<Attach>,
) -> ContainerCreateBody {
    let mut binds: Vec<String> = container.mounts.iter().map(|m| bind(ctx.workspace, m)).collect();
    if let (Some(file), Some(path)) = (token_file, container.token) {
        binds.push(format!("{}:{path}:ro", file.display()));
    }
    let (role, alias) = match container.role {
        Role::Builder(_) => (ROLE_BUILDER, Some(container.name.clone())),
        Role::Agent => (ROLE_AGENT, None),
    };
    let mut labels = ctx.name.labels(role, container.runtime(), ctx.owner);
    if let Some(dir) = &ctx.token_dir {
        labels.insert(LABEL_TOKEN_DIR.to_owned(), dir.clone());
    }
    let attach = attach.unwrap_or_default();
    let agent = container.role == Role::Agent;
    ContainerCreateBody {
        image: Some(container.image.clone()),
        cmd: (!container.command.is_empty()).then(|| container.command.clone()),
        env: Some(container.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        user: match &container.user {
            User::Image => None,
            User::Caller => Some(ctx.caller.clone()),
            User::Given(user) => Some(user.clone()),
        },
        working_dir: container.working_dir.clone(),
        tty: agent.then_some(attach.tty),
        open_stdin: agent.then_some(attach.stdin),
        stdin_once: agent.then_some(attach.stdin),
        attach_stdin: agent.then_some(attach.stdin),
        attach_stdout: agent.then_some(true),
        attach_stderr: agent.then_some(true),
        labels: Some(labels),
        healthcheck: container.health.as_ref().and_then(health_check),
        host_config: Some(HostConfig {
            tmpfs: (!container.tmpfs.is_empty())
                .then(|| container.tmpfs.iter().map(|path| (path.clone(), tmpfs_options(ctx, container))).collect()),
            ..host_config(ctx, binds, &container.groups)
        }),
        networking_config: Some(network(ctx, alias)),
        ..Default::default()
    }
}

/// The container's own health check when the profile overrides the image's, at the gate's pace (compose's
/// `healthcheck:`): Docker runs it and reports its status, which the gate and `ps` read before any exec probe, so
/// an engine's verdict and the probe's come from the same command. Without an override the image's HEALTHCHECK
/// stays as the image declares it (the gate's probe runs that one too).
fn health_check(health: &BuilderHealth) -> Option<HealthConfig> {
    let nanos = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    Some(HealthConfig {
        test: Some(health.test.clone()?),
        interval: Some(nanos(HEALTH_INTERVAL)),
        timeout: Some(nanos(HEALTH_TIMEOUT)),
        retries: Some(i64::try_from(health.retries()).unwrap_or(i64::MAX)),
        ..Default::default()
    })
}

/// A tmpfs owned by the container's user: Podman's `U` (it ignores `mode=` and refuses `uid=`), Docker's
/// `uid=`/`gid=` for a numeric user, else a sticky folder any uid can write (as /tmp). Docker mounts a tmpfs
/// `noexec` by default: the wrappers must run.
fn tmpfs_options(ctx: &Context<'_>, container: &Container) -> String {
    let user = match &container.user {
        User::Image => None,
        User::Caller => Some(ctx.caller.as_str()),
        User::Given(user) => Some(user.as_str()),
    };
    let ids = user.and_then(|u| {
        let (uid, gid) = u.split_once(':').unwrap_or((u, u));
        Some((uid.parse::<u32>().ok()?, gid.parse::<u32>().ok()?))
    });
    match (ctx.engine, ids) {
        (EngineKind::Podman, _) => "rw,U".to_owned(),
        (EngineKind::Docker, Some((uid, gid))) => format!("rw,exec,nosuid,nodev,uid={uid},gid={gid},mode=0755"),
        (EngineKind::Docker, None) => "rw,exec,nosuid,nodev,mode=1777".to_owned(),
    }
}

/// The engine's bind syntax, `source:target[:ro]`, the workspace as the folder this machine has.
pub fn bind(workspace: &Path, volume: &Volume) -> String {
    let source = match &volume.source {
        VolumeSource::Named(name) => name.clone(),
        other => other.host_path(workspace).unwrap_or_default().display().to_string(),
    };
    format!("{source}:{}{}", volume.target, if volume.read_only { ":ro" } else { "" })
}

fn host_config(ctx: &Context<'_>, binds: Vec<String>, groups: &[String]) -> HostConfig {
    let ulimits = ctx
        .plan
        .ulimits
        .iter()
        .map(|u| ResourcesUlimits { name: Some(u.name.clone()), soft: Some(u.soft), hard: Some(u.hard) })
        .collect::<Vec<_>>();
    HostConfig {
        binds: Some(binds),
        group_add: (!groups.is_empty()).then(|| groups.to_vec()),
        network_mode: Some(ctx.name.network()),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        ulimits: (!ulimits.is_empty()).then_some(ulimits),
        // No restart policy and no port bindings: nothing outside the run's network reaches a builder.
        ..Default::default()
    }
}

fn network(ctx: &Context<'_>, alias: Option<String>) -> NetworkingConfig {
    let endpoint = EndpointSettings { aliases: alias.map(|a| vec![a]), ..Default::default() };
    NetworkingConfig { endpoints_config: Some(HashMap::from([(ctx.name.network(), endpoint)])) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunConfig, Ulimit, WorkspaceLookup};
    use crate::options::RunOptions;
    use crate::plan::{AgentRequest, Deployment};
    use crate::profile::Profile;

    fn run(yaml: &str) -> RunConfig {
        let profile = Profile::parse(yaml, "t").unwrap();
        RunConfig::build(&RunOptions::default(), profile, &std::env::temp_dir(), WorkspaceLookup::Resolve).unwrap()
    }

    const PROFILE: &str = r#"
tool_backends:
  sidecars:
    - runtime: node
      image: my-node
      port: 9000
      env: {NPM_CONFIG_FUND: "false"}
      env_passthrough: [NPM_TOKEN]
      cache_volumes: ["npm-cache:/cache/npm"]
    - runtime: python
      image: my-python
      run_as_caller_uid: false
      command: [exec-server, -port, "8080", -cwd, /workspace, --verbose]
"#;

    const OWNER: &RunOwner = &RunOwner { uid: 2345, workspace: String::new() };

    fn context<'a>(plan: &'a Plan, name: &'a RunName, workspace: &'a Path) -> Context<'a> {
        Context {
            engine: EngineKind::Docker,
            plan,
            name,
            owner: OWNER,
            workspace,
            caller: "2345:2346".into(),
            token_dir: Some("/run/user/2345/sidecarctl/r1".into()),
        }
    }

    #[test]
    fn a_builder_is_hardened_private_and_labelled() {
        let mut r = run(PROFILE);
        r.ulimits = vec![Ulimit { name: "nofile".into(), soft: 4096, hard: 4096 }];
        let plan = Plan::new(&r, AgentRequest::default(), Deployment::Up);
        let name = RunName::named("r1").unwrap();
        let ctx = context(&plan, &name, &r.workspace);
        let body = body(&ctx, &plan.builders[0], Some(Path::new("/host/token")), None);
        assert_eq!(body.image.as_deref(), Some("my-node"));
        assert_eq!(body.cmd.unwrap(), ["exec-server", "-port", "9000", "-cwd", "/workspace"]);
        assert_eq!(body.user.as_deref(), Some("2345:2346"));
        assert_eq!(
            body.env.unwrap(),
            [
                "NPM_CONFIG_FUND=false",
                "EXEC_SERVER_PORT=9000",
                "HOME=/workspace/.sidecarctl/home/node",
                "EXEC_SERVER_TOKEN_FILE=/run/secrets/sidecar-token"
            ]
        );
        let labels = body.labels.unwrap();
        assert_eq!(labels["sidecarctl.role"], "build-sidecar");
        assert_eq!(labels["sidecarctl.runtime"], "node");
        assert_eq!(labels["sidecarctl.run"], "r1");
        assert_eq!(labels["sidecarctl.token-dir"], "/run/user/2345/sidecarctl/r1");
        let host = body.host_config.unwrap();
        let workspace = std::env::temp_dir().canonicalize().unwrap();
        assert_eq!(
            host.binds.unwrap(),
            [
                format!("{}:/workspace", workspace.display()),
                "npm-cache:/cache/npm".into(),
                "/host/token:/run/secrets/sidecar-token:ro".into()
            ]
        );
        assert_eq!(host.cap_drop.unwrap(), ["ALL"]);
        assert_eq!(host.security_opt.unwrap(), ["no-new-privileges"]);
        assert_eq!(host.group_add.unwrap(), ["1000"], "the images' builder group, for shared cache volumes");
        assert_eq!(host.network_mode.as_deref(), Some("sidecarctl-r1"));
        assert!(host.port_bindings.is_none() && host.publish_all_ports.is_none() && host.restart_policy.is_none());
        let ulimit = &host.ulimits.unwrap()[0];
        assert_eq!((ulimit.name.as_deref(), ulimit.soft, ulimit.hard), (Some("nofile"), Some(4096), Some(4096)));
        let endpoints = body.networking_config.unwrap().endpoints_config.unwrap();
        assert_eq!(endpoints["sidecarctl-r1"].aliases.as_deref().unwrap(), ["builder-node"]);
        assert!(body.exposed_ports.is_none() && body.tty.is_none() && body.open_stdin.is_none());

        // Not as the caller: the image's user, no HOME override; a command override is kept as written.
        let body = super::body(&ctx, &plan.builders[1], None, None);
        assert_eq!(body.user, None);
        assert_eq!(body.host_config.as_ref().unwrap().group_add, None, "the image's user has the group already");
        assert_eq!(body.env.unwrap(), ["EXEC_SERVER_PORT=8080", "EXEC_SERVER_TOKEN_FILE=/run/secrets/sidecar-token"]);
        assert_eq!(body.cmd.unwrap().last().map(String::as_str), Some("--verbose"));
    }

    /// A profile's health command is the container's health check, at the gate's pace, so Docker's own status
    /// follows it; without one the image's HEALTHCHECK stays (before, Docker's image check passed a builder whose
    /// profile said `[CMD, "false"]`, while Podman, probed through exec, timed out).
    #[test]
    fn a_profiles_health_command_is_the_containers_health_check() {
        let r = run("tool_backends:\n  sidecars:\n    - {runtime: node, image: n, ready_timeout: 7, \
                     healthcheck: {test: [CMD, 'false'], interval: 30s}}\n    - {runtime: python, image: p}\n");
        let plan = Plan::new(&r, AgentRequest::default(), Deployment::Up);
        let name = RunName::named("r1").unwrap();
        let ctx = context(&plan, &name, &r.workspace);
        let check = body(&ctx, &plan.builders[0], None, None).healthcheck.expect("the override is the container's");
        assert_eq!(check.test.unwrap(), ["CMD", "false"]);
        let second = 1_000_000_000;
        assert_eq!((check.interval, check.timeout), (Some(2 * second), Some(3 * second)), "the gate's, not the 30s");
        assert_eq!(check.retries, Some(4), "ceil(7 s / 2 s)");
        assert_eq!(check.start_period, None, "the image's");
        assert_eq!(body(&ctx, &plan.builders[1], None, None).healthcheck, None, "the image's HEALTHCHECK");
        assert_eq!(body(&ctx, &plan.agent, None, None).healthcheck, None);
    }

    #[test]
    fn the_agent_gets_the_contract_the_token_and_the_workspace() {
        let r = run(PROFILE);
        let request = AgentRequest {
            image: "sidecar-agent".into(),
            command: vec!["sh".into(), "-c".into(), "exit 7".into()],
            env: vec![("A".into(), "1".into())],
            ..Default::default()
        };
        let plan = Plan::new(&r, request, Deployment::Up);
        let name = RunName::named("r1").unwrap();
        let ctx = context(&plan, &name, &r.workspace);
        let attach = Attach { tty: false, stdin: true };
        let body = body(&ctx, &plan.agent, Some(Path::new("/host/token-1000")), Some(attach));
        assert_eq!(
            body.env.unwrap(),
            [
                "A=1",
                r#"BUILD_SIDECARS={"node":{"internal_url":"http://builder-node:9000"},"python":{"internal_url":"http://builder-python:8080"}}"#,
                "SIDECAR_ENV_PASSTHROUGH=NPM_TOKEN",
                "SIDECAR_TOKEN_FILE=/run/secrets/sidecar-token"
            ]
        );
        assert_eq!(body.working_dir.as_deref(), Some("/workspace"));
        assert_eq!(body.user, None);
        assert_eq!((body.tty, body.open_stdin, body.stdin_once), (Some(false), Some(true), Some(true)));
        assert_eq!(body.labels.unwrap()["sidecarctl.role"], "agent");
        let host = body.host_config.unwrap();
        assert!(host.binds.unwrap().contains(&"/host/token-1000:/run/secrets/sidecar-token:ro".to_owned()));
        assert_eq!(host.cap_drop.unwrap(), ["ALL"]);
        assert!(body.networking_config.unwrap().endpoints_config.unwrap()["sidecarctl-r1"].aliases.is_none());
    }
}
