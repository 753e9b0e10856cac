//! `sidecarctl compose`: the run's plan as a compose file, one service per planned container (`builder-RT`,
//! `agent`) with its image, command, user, groups, working folder, environment and volumes, hardened as `up`
//! hardens it (`cap_drop`, `security_opt`, no restart policy, nothing published), the builders with a healthcheck
//! at the gate's pace; the agent with `depends_on: {builder-RT: {condition: service_healthy}}` and an init; the
//! token as a compose secret.
//!
//! The file is the same on every machine: the caller's uid is `${SIDECAR_UID:-1000}:${SIDECAR_GID:-1000}` (from
//! `.env`), the workspace `${WORKSPACE:-<--workspace as written, else .>}`. It has no `build:` sections: like `up`
//! and the Pod, it runs images, which are built once (docs/images.md) and then shared by all three; the header
//! lists the build commands for this project's images.

use serde_norway::Value;

use super::emit::{self, list, map, opt, s, strings, EmitOptions};
use super::yaml::{self, NotRoundTrip};
use crate::model::{RunConfig, Volume, VolumeSource};
use crate::names::{LABEL_ROLE, LABEL_RUNTIME, ROLE_AGENT, ROLE_BUILDER};
use crate::plan::{Container, Deployment, Plan, Role, User, HEALTH_INTERVAL, HEALTH_TIMEOUT};

const SECRET: &str = "sidecar_token";
const USER: &str = "${SIDECAR_UID:-1000}:${SIDECAR_GID:-1000}";

pub fn emit(run: &RunConfig, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    let plan = Plan::new(run, options.agent_request(), Deployment::Compose);
    let workspace_text = emit::workspace_text(&options.run);
    let workspace = workspace_source(&workspace_text);
    let ulimits = if plan.ulimits.is_empty() {
        Value::Null
    } else {
        let mut limits = serde_norway::Mapping::new();
        for u in &plan.ulimits {
            limits.insert(s(u.name.clone()), map([("soft", u.soft.into()), ("hard", u.hard.into())]));
        }
        Value::Mapping(limits)
    };

    let mut services = serde_norway::Mapping::new();
    for container in plan.containers() {
        services.insert(s(container.name.clone()), service(&plan, container, &workspace, &ulimits));
    }
    let mut volumes = serde_norway::Mapping::new();
    // `name:` keeps compose from prefixing its project (`<project>_npm-cache`): `up` and compose share the caches.
    for name in plan.named_volumes() {
        volumes.insert(s(name), map([("name", s(name))]));
    }
    let document = map([
        ("services", Value::Mapping(services)),
        ("networks", map([("builders", Value::Mapping(Default::default()))])),
        ("volumes", opt((!volumes.is_empty()).then_some(Value::Mapping(volumes)))),
        ("secrets", opt(plan.agent.token.map(|_| map([(SECRET, map([("file", s("./sidecar-token"))]))])))),
    ]);
    Ok(format!("{}\n{}", header(&plan, options, &workspace_text), yaml::render(&document, &comment)?))
}

/// One service: the planned container, hardened as `up` hardens it, on the private network. The agent also gets an
/// init and waits for every builder's healthcheck.
fn service(plan: &Plan, container: &Container, workspace: &str, ulimits: &Value) -> Value {
    let mut env = serde_norway::Mapping::new();
    for (name, value) in &container.env {
        env.insert(s(name.clone()), literal(value));
    }
    let volumes: Vec<String> = container.mounts.iter().map(|m| volume(m, workspace)).collect();
    let agent = container.role == Role::Agent;
    let mut depends = serde_norway::Mapping::new();
    if agent {
        for builder in &plan.builders {
            depends.insert(s(builder.name.clone()), map([("condition", s("service_healthy"))]));
        }
    }
    let healthcheck = container.health.as_ref().map(|health| {
        map([
            ("test", literals(&health.test_or_images())),
            ("interval", s(format!("{}s", HEALTH_INTERVAL.as_secs()))),
            ("timeout", s(format!("{}s", HEALTH_TIMEOUT.as_secs()))),
            ("retries", health.retries().into()),
        ])
    });
    map([
        ("image", literal(&container.image)),
        ("command", opt((!container.command.is_empty()).then(|| literals(&container.command)))),
        (
            "user",
            opt(match &container.user {
                User::Image => None,
                User::Caller => Some(s(USER)),
                User::Given(user) => Some(literal(user)),
            }),
        ),
        ("group_add", opt((!container.groups.is_empty()).then(|| strings(&container.groups)))),
        ("init", opt(agent.then_some(true.into()))),
        ("working_dir", opt(container.working_dir.as_deref().map(literal))),
        ("environment", opt((!env.is_empty()).then_some(Value::Mapping(env)))),
        ("volumes", strings(&volumes)),
        ("secrets", opt(container.token.map(|_| list([s(SECRET)])))),
        ("ulimits", ulimits.clone()),
        ("cap_drop", list([s("ALL")])),
        ("security_opt", list([s("no-new-privileges:true")])),
        ("networks", list([s("builders")])),
        ("labels", labels(container)),
        ("healthcheck", opt(healthcheck)),
        ("depends_on", opt((!depends.is_empty()).then_some(Value::Mapping(depends)))),
    ])
}

/// A volume in compose's short syntax: the workspace as [`workspace_source`] gives it (and what is under it
/// relative to it), other paths and volume names as they are; every `$` but the workspace variable's escaped.
fn volume(volume: &Volume, workspace: &str) -> String {
    let source = match &volume.source {
        VolumeSource::Workspace { under } if under.is_empty() => workspace.to_owned(),
        VolumeSource::Workspace { under } => format!("{workspace}/{}", escape(under)),
        VolumeSource::Host(path) => escape(&path.display().to_string()),
        VolumeSource::Named(name) => escape(name),
    };
    format!("{source}:{}{}", escape(&volume.target), if volume.read_only { ":ro" } else { "" })
}

/// The workspace's source: `${WORKSPACE:-<as written>}`, so `.env` can move it. A path with `$` or `}` is written
/// as it is instead (escaped): the end of a default is the first `}`, and compose implementations disagree on
/// escapes inside a default, so such a path could not be the variable's default safely.
pub fn workspace_source(written: &str) -> String {
    if written.contains(['$', '}']) {
        escape(written)
    } else {
        format!("${{WORKSPACE:-{written}}}")
    }
}

/// `text` as compose reads it back after interpolation: every `$` doubled (`$$` is compose's literal `$`). Every
/// value sidecarctl writes goes through this but the two variables it means (`SIDECAR_UID`/`SIDECAR_GID` and
/// `WORKSPACE`): a `$HOME` in a command or `${SECRET}` in a profile's env is the container's, never the host's
/// of whoever runs `docker compose up`.
pub fn escape(text: &str) -> String {
    text.replace('$', "$$")
}

fn literal(text: &str) -> Value {
    s(escape(text))
}

fn literals(items: &[String]) -> Value {
    list(items.iter().map(|item| literal(item)))
}

/// Sidecarctl's role and runtime labels, so `docker ps --filter label=sidecarctl.role=build-sidecar` finds the
/// builders. Not `sidecarctl.managed`: compose owns these containers, and `sidecarctl ps`/`down` (which select
/// that label) must not list or remove what they did not start.
fn labels(container: &Container) -> Value {
    let role = if container.role == Role::Agent { ROLE_AGENT } else { ROLE_BUILDER };
    map([(LABEL_ROLE, s(role)), (LABEL_RUNTIME, opt(container.runtime().map(|rt| s(rt.to_string()))))])
}

fn comment(path: &[&str]) -> Option<String> {
    let text = match path {
        ["services", _, "group_add"] => {
            "The images' builder group (BUILDER_GID): folders another uid created in a cache volume stay writable\n\
             (the images run commands with umask 0002, and their cache folders are setgid to this group)."
        }
        ["services", _, "healthcheck"] => {
            "The image's own probe at the gate's pace (an image built in podman's default OCI format has no HEALTHCHECK)."
        }
        ["services", "agent", "command"] => {
            "The agent's command (what follows AGENT_IMAGE): replace it with your agent. The image's entrypoint\n\
             writes the wrappers first, then execs it."
        }
        ["services", "agent", "init"] => "An init as PID 1: the agent stops at once on SIGTERM, and orphans are reaped.",
        ["networks", "builders"] => {
            "Private: nothing is published, and only the services on this network reach the builders, by service name.\n\
             The builders still reach package registries; add `internal: true` to cut them off."
        }
        ["volumes"] => {
            "The caches, named as `sidecarctl up` names them, so both share them: `docker compose down` keeps them\n\
             (`down --volumes` would not)."
        }
        _ => return None,
    };
    Some(text.to_owned())
}

fn header(plan: &Plan, options: &EmitOptions, workspace_text: &str) -> String {
    let mut text = format!(
        "Generated by `{}`:\n\
         the run `sidecarctl up` starts with the same options, as compose services. To change it, change the\n\
         options and regenerate.\n\n",
        options.generator()
    );
    let builds = emit::build_commands(plan);
    if builds.is_empty() {
        text.push_str("The images must exist first (compose pulls a missing one).\n");
    } else {
        text.push_str("Build the images first, from a sidecar-exec checkout (docs/images.md, \"Building\"):\n");
        for line in builds {
            text.push_str(&format!("  {}\n", line.replace('\n', "\n  ")));
        }
    }
    text.push_str("Then, in the folder of this file, as the user who will own the files:\n");
    if plan.containers().any(|c| c.user == User::Caller) {
        text.push_str("  printf 'SIDECAR_UID=%s\\nSIDECAR_GID=%s\\n' \"$(id -u)\" \"$(id -g)\" > .env   # the builders run as you\n");
    }
    if plan.agent.token.is_some() {
        text.push_str(
            "  (umask 077; head -c 32 /dev/urandom | base64 > sidecar-token)   # the shared bearer token, mode 0600\n",
        );
    }
    if workspace_text != "." {
        let movable = if workspace_source(workspace_text).starts_with("${WORKSPACE") {
            "or WORKSPACE=/your/project in .env; "
        } else {
            "the path has `$` or `}`, so the file names it as it is (not through WORKSPACE); "
        };
        text.push_str(&format!(
            "  mkdir -p {}   # {movable}it must exist first\n",
            protocol::shell::word(workspace_text)
        ));
    }
    // Compose v2 is `docker compose`; Debian ships only v1, `docker-compose`, where `docker compose` is "unknown
    // command". The trailing comment keeps each step one command to copy (and images/test.sh runs the steps).
    text.push_str("  docker compose up -d   # Compose v1 (Debian's docker-compose package): docker-compose up -d\n");
    if !plan.builders.is_empty() {
        let tries: Vec<&str> = plan.builders.iter().filter_map(|c| c.runtime().map(emit::version_command)).collect();
        text.push_str(&format!("  docker compose exec agent sh -c '{}'\n", tries.join("; ")));
    }
    text.push('\n');
    if workspace_text != "." {
        text.push_str(
            "The workspace must exist before `up`: the engine creates a missing bind source as root, and the builders\n\
             (running as you) then cannot write it; exec-server logs a warning naming the uid and the folder.\n",
        );
    }
    if !plan.builders.is_empty() {
        text.push_str(
            "`exec` finds the wrappers because the agent image has their folder on PATH (use `sh -c`; a login shell\n\
             gets it from /etc/profile.d). The builders publish no port. The agent starts once every builder reports\n\
             healthy.\n",
        );
    }
    emit::comment_block(&text)
}
