//! One run rendered three ways — the Engine API bodies `up` creates, the compose file, the Pod — and each
//! rendering read back into what its containers get: each equals its plan, and the three agree on everything but
//! what the targets are declared to differ in (token path, builder addresses and ports, the caller).

use std::collections::BTreeMap;
use std::path::Path;

use serde_norway::Value;

use super::api::{self, Attach, Context};
use super::emit::EmitOptions;
use super::{compose, kube};
use crate::model::{RunConfig, WorkspaceLookup};
use crate::names::RunName;
use crate::options::RunOptions;
use crate::plan::{Container, Deployment, Plan};
use crate::profile::Profile;

/// What a container gets, as far as a rendering says it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    name: String,
    image: String,
    command: Vec<String>,
    working_dir: Option<String>,
    env: BTreeMap<String, String>,
    /// Target → read-only, for every mount but the token's.
    mounts: BTreeMap<String, bool>,
    /// Where the token file is seen.
    token: Option<String>,
    /// The health command the container itself runs: the engine's check (`up`), compose's `healthcheck:` (a Pod
    /// probes `/health`).
    health: Option<Vec<String>>,
}

fn seen_plan(plan: &Plan) -> Vec<Seen> {
    plan.containers()
        .map(|c: &Container| Seen {
            name: c.name.clone(),
            image: c.image.clone(),
            command: c.command.clone(),
            working_dir: c.working_dir.clone(),
            env: c.env.iter().cloned().collect(),
            mounts: c.mounts.iter().map(|m| (m.target.clone(), m.read_only)).collect(),
            token: c.token.map(str::to_owned),
            // Declared per target: `up` writes only a profile's override (the image's HEALTHCHECK stays), compose
            // writes one always (an OCI-format image has none), a Pod probes over HTTP.
            health: c.health.as_ref().and_then(|h| match plan.deployment {
                Deployment::Up => h.test.clone(),
                Deployment::Compose => Some(h.test_or_images()),
                Deployment::Pod => None,
            }),
        })
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_sequence().map(|items| items.iter().map(text).collect()).unwrap_or_default()
}

/// What compose makes of a value it interpolates, with no variable set: `$$` is `$`; any other `$` would be a
/// variable of the machine that runs `docker compose up`, which sidecarctl never means here.
fn compose_meaning(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' {
            assert_eq!(chars.next(), Some('$'), "compose would interpolate {text:?}");
        }
        out.push(c);
    }
    out
}

/// What Kubernetes makes of `command`, `args` and `env[].value` (its documented expansion: `$(NAME)` is a variable
/// reference, `$$` a literal `$`, anything else as written), with a mapping that marks every expansion.
fn kube_meaning(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(close) = after.strip_prefix('(').and_then(|r| r.find(')')) {
            out.push_str(&format!("<expanded {}>", &after[1..close + 1]));
            rest = &after[close + 2..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `source:target[:ro]` → (target, read-only).
fn short_volume(bind: &str) -> (String, bool) {
    let (rest, read_only) = match bind.strip_suffix(":ro") {
        Some(rest) => (rest, true),
        None => (bind, false),
    };
    let target = &rest[rest.rfind(':').expect("source:target") + 1..];
    (target.to_owned(), read_only)
}

const TOKEN_FILE: &str = "/host/sidecarctl/run/token";

fn seen_api(run: &RunConfig, plan: &Plan) -> Vec<Seen> {
    let name = RunName::named("three-ways").unwrap();
    let owner = crate::names::RunOwner::caller(&run.workspace);
    let ctx = Context {
        engine: crate::engine::EngineKind::Podman,
        plan,
        name: &name,
        owner: &owner,
        workspace: &run.workspace,
        caller: "2345:2346".into(),
        token_dir: None,
    };
    plan.containers()
        .map(|c| {
            let attach = (c.name == "agent").then_some(Attach::default());
            let body = api::body(&ctx, c, run.token.then_some(Path::new(TOKEN_FILE)), attach);
            let binds = body.host_config.and_then(|h| h.binds).unwrap_or_default();
            let token = binds
                .iter()
                .find_map(|b| b.strip_prefix(&format!("{TOKEN_FILE}:")))
                .map(|rest| rest.strip_suffix(":ro").expect("the token is bound read-only").to_owned());
            Seen {
                name: c.name.clone(),
                image: body.image.unwrap(),
                command: body.cmd.unwrap_or_default(),
                working_dir: body.working_dir,
                env: body
                    .env
                    .unwrap_or_default()
                    .iter()
                    .map(|e| {
                        let (k, v) = e.split_once('=').unwrap();
                        (k.to_owned(), v.to_owned())
                    })
                    .collect(),
                mounts: binds.iter().filter(|b| !b.starts_with(TOKEN_FILE)).map(|b| short_volume(b)).collect(),
                token,
                health: body.healthcheck.and_then(|h| h.test),
            }
        })
        .collect()
}

fn seen_compose(file: &str) -> Vec<Seen> {
    let doc: Value = serde_norway::from_str(file).unwrap();
    doc["services"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(name, service)| Seen {
            name: text(name),
            image: compose_meaning(&text(&service["image"])),
            command: strings(&service["command"]).iter().map(|a| compose_meaning(a)).collect(),
            working_dir: service.get("working_dir").map(|w| compose_meaning(&text(w))),
            env: service
                .get("environment")
                .and_then(Value::as_mapping)
                .map(|env| env.iter().map(|(k, v)| (text(k), compose_meaning(&text(v)))).collect())
                .unwrap_or_default(),
            // The sources hold the one variable meant (`${WORKSPACE:-…}`); the targets none.
            mounts: strings(&service["volumes"])
                .iter()
                .map(|v| short_volume(v))
                .map(|(target, read_only)| (compose_meaning(&target), read_only))
                .collect(),
            token: strings(&service["secrets"]).first().map(|secret| format!("/run/secrets/{secret}")),
            health: service
                .get("healthcheck")
                .map(|check| strings(&check["test"]).iter().map(|a| compose_meaning(a)).collect()),
        })
        .collect()
}

fn seen_kube(file: &str) -> Vec<Seen> {
    let pod: Value = serde_norway::from_str(file.split("\n---\n").next().unwrap()).unwrap();
    let spec = &pod["spec"];
    let init = spec.get("initContainers").and_then(Value::as_sequence).cloned().unwrap_or_default();
    let containers = spec["containers"].as_sequence().unwrap();
    init.iter()
        .map(|c| (c, "args"))
        .chain(containers.iter().map(|c| (c, "args")))
        .map(|(c, args)| {
            let mounts = c["volumeMounts"].as_sequence().unwrap();
            let is_token = |m: &&Value| m["name"] == "token";
            Seen {
                name: text(&c["name"]),
                image: text(&c["image"]),
                command: strings(&c[args]).iter().map(|a| kube_meaning(a)).collect(),
                working_dir: c.get("workingDir").map(text),
                env: c
                    .get("env")
                    .and_then(Value::as_sequence)
                    .map(|env| env.iter().map(|e| (text(&e["name"]), kube_meaning(&text(&e["value"])))).collect())
                    .unwrap_or_default(),
                mounts: mounts
                    .iter()
                    .filter(|m| !is_token(m))
                    .map(|m| (text(&m["mountPath"]), m.get("readOnly").and_then(Value::as_bool).unwrap_or(false)))
                    .collect(),
                token: mounts.iter().find(is_token).map(|m| format!("{}/token", text(&m["mountPath"]))),
                health: None,
            }
        })
        .collect()
}

/// Renders `profile` + `args` three ways; checks each against its plan; returns the three readings.
fn three_ways(profile: &str, options: RunOptions, agent: &[&str]) -> [Vec<Seen>; 3] {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    if let Some(workspace) = &options.workspace {
        std::fs::create_dir_all(cwd.join(workspace)).unwrap();
    }
    let emit = EmitOptions { run: options, agent: agent.iter().map(|a| a.to_string()).collect(), command_line: vec![] };
    let parse = || Profile::parse(profile, "three-ways.yaml").unwrap();
    // `up` resolves the workspace (here the current folder); the files name it as written.
    let up_run = RunConfig::build(&emit.run, parse(), &cwd, WorkspaceLookup::Resolve).unwrap();
    let file_run = RunConfig::build(&emit.run, parse(), &cwd, WorkspaceLookup::AsWritten).unwrap();

    let up_plan = Plan::new(&up_run, emit.agent_request(), Deployment::Up);
    let up = seen_api(&up_run, &up_plan);
    assert_eq!(up, seen_plan(&up_plan), "up's bodies are its plan");
    let compose = seen_compose(&compose::emit(&file_run, &emit).unwrap());
    assert_eq!(compose, seen_plan(&Plan::new(&file_run, emit.agent_request(), Deployment::Compose)), "compose's plan");
    let pod = seen_kube(&kube::emit(&file_run, &emit).unwrap());
    assert_eq!(pod, seen_plan(&Plan::new(&file_run, emit.agent_request(), Deployment::Pod)), "the Pod's plan");

    // The three agree but for the declared differences.
    for (other, what) in [(&compose, "compose"), (&pod, "the Pod")] {
        assert_eq!(other.len(), up.len(), "{what}: the same containers");
        for (a, b) in up.iter().zip(other) {
            assert_eq!((&a.name, &a.image, &a.working_dir, &a.mounts), (&b.name, &b.image, &b.working_dir, &b.mounts));
            assert_eq!(a.token.is_some(), b.token.is_some(), "{what}: {}'s token", a.name);
            if a.health.is_some() && what == "compose" {
                assert_eq!(a.health, b.health, "{what}: {}'s health command", a.name);
            }
            let names = |s: &Seen| s.env.keys().filter(|k| *k != "HOME").cloned().collect::<Vec<_>>();
            assert_eq!(names(a), names(b), "{what}: {}'s variables", a.name);
            for (name, value) in &a.env {
                let declared =
                    ["BUILD_SIDECARS", "EXEC_SERVER_PORT", "EXEC_SERVER_TOKEN_FILE", "SIDECAR_TOKEN_FILE", "HOME"];
                if !declared.contains(&name.as_str()) {
                    assert_eq!(Some(value), b.env.get(name), "{what}: {}'s {name}", a.name);
                }
            }
        }
    }
    [up, compose, pod]
}

const EXAMPLE: &str = "tool_backends:\n  sidecars:\n    - {runtime: node, image: sidecar-builder-node:latest, \
                       cache_volumes: [\"npm-cache:/cache/npm\"]}\n    - {runtime: python, image: sidecar-builder-python:latest, \
                       cache_volumes: [\"pip-cache:/cache/pip\"]}\n";

#[test]
fn the_example_run_is_one_plan_three_ways() {
    let options = RunOptions { workspace: Some("./workspace".into()), ..Default::default() };
    let [up, compose, pod] = three_ways(EXAMPLE, options, &["sidecar-agent:latest", "sleep", "infinity"]);
    for seen in [&up, &compose, &pod] {
        let agent = seen.last().unwrap();
        assert_eq!(agent.working_dir.as_deref(), Some("/workspace"));
        assert_eq!(agent.command, ["sleep", "infinity"]);
    }
    // A Pod's builders share one network namespace: distinct ports, in the command and the variable alike.
    assert_eq!(pod[0].command, ["exec-server", "-port", "8081", "-cwd", "/workspace"]);
    assert_eq!(pod[1].env["EXEC_SERVER_PORT"], "8082");
    assert_eq!(up[1].command, ["exec-server", "-port", "8080", "-cwd", "/workspace"]);
}

/// No builders, the workspace at /src: the agent works in /src whichever way it runs. Before the plan, `up` gave
/// /src, compose no working_dir and the Pod /workspace.
#[test]
fn without_builders_the_agent_works_in_the_workspace_everywhere() {
    let profile = "volumes: [{source: '${CWD}', target: /src}]\n";
    let [up, compose, pod] = three_ways(profile, RunOptions::default(), &["sidecar-agent", "true"]);
    for (seen, what) in [(&up, "up"), (&compose, "compose"), (&pod, "kube")] {
        assert_eq!(seen.len(), 1, "{what}: the agent alone");
        assert_eq!(seen[0].working_dir.as_deref(), Some("/src"), "{what}");
        assert_eq!(seen[0].mounts.keys().collect::<Vec<_>>(), ["/src"], "{what}");
    }
}

/// Every kind of volume, a builder not run as the caller with its own command, equal ports, passthrough names, and
/// no token.
#[test]
fn every_kind_of_volume_and_override_is_one_plan_three_ways() {
    let profile = "volumes:\n  - {source: '${CWD}', target: /src}\n  - {source: '${CWD}/data', target: /data, read_only: true}\n  \
                   - {source: /etc/ssl/certs, target: /certs, read_only: true}\n  - {source: shared-data, target: /shared}\n\
                   tool_backends:\n  ready_timeout: 7\n  sidecars:\n    - {runtime: go, image: my-go, workspace_target: /src, \
                   env: {GOFLAGS: -mod=mod}, env_passthrough: [GOPRIVATE], cache_volumes: [\"go-cache:/cache/go:ro\"]}\n    \
                   - {runtime: rust, image: my-rust, workspace_target: /src, run_as_caller_uid: false, \
                   command: [exec-server, -port, \"8080\", -cwd, /src, -verbose], healthcheck: {test: [CMD-SHELL, 'true']}}\n";
    let options = RunOptions { no_token: true, ..Default::default() };
    let [up, _, pod] = three_ways(profile, options, &["my-agent"]);
    let agent = up.last().unwrap();
    assert_eq!(agent.working_dir.as_deref(), Some("/src"));
    assert_eq!(agent.token, None);
    assert_eq!(agent.env["SIDECAR_ENV_PASSTHROUGH"], "GOPRIVATE");
    assert_eq!(
        agent.mounts,
        BTreeMap::from([
            ("/certs".into(), true),
            ("/data".into(), true),
            ("/shared".into(), false),
            ("/src".into(), false)
        ])
    );
    assert_eq!(up[0].mounts, BTreeMap::from([("/src".into(), false), ("/cache/go".into(), true)]));
    assert_eq!(up[0].env["HOME"], "/src/.sidecarctl/home/go", "the caller's HOME, in the workspace");
    assert!(!pod[0].env.contains_key("HOME"), "a Pod has no caller: the image's HOME");
    // The override is the user's, as written, on every target; in a Pod it keeps the port it names, and the other
    // builder, which had the same port, moves.
    assert_eq!(up[1].command, pod[1].command);
    assert_eq!(up[1].health.as_deref(), Some(&["CMD-SHELL".to_owned(), "true".into()][..]), "the override");
    assert_eq!(up[0].health, None, "the image's HEALTHCHECK");
    assert_eq!(pod[1].command.last().map(String::as_str), Some("-verbose"));
    assert_eq!(pod[1].env["EXEC_SERVER_PORT"], "8080");
    assert_eq!(pod[0].env["EXEC_SERVER_PORT"], "8081");
}

/// Every `$` is the container's: compose's `${VAR}`/`$VAR` and Kubernetes' `$(VAR)` are escaped in everything the
/// plan holds, so each file means the very values `up` passes.
#[test]
fn dollars_mean_the_same_three_ways() {
    let profile = "volumes:\n  - {source: '${CWD}', target: /workspace}\n  - {source: '/tmp/$HOME/x', target: '/m/$(X)'}\n\
                   tool_backends:\n  sidecars:\n    - {runtime: node, image: 'img$x', env: {SECRET: '${SECRET}', K: '$(K8S)', \
                   P: '$$5', E: '$'}, cache_volumes: ['/tmp/${USER}/cache:/cache/npm'], \
                   healthcheck: {test: [CMD-SHELL, 'test -n \"$HOME\"']}}\n";
    let script = r#"echo "home is $HOME, price is $$5, $(id -u) ${USER:-x} $""#;
    let [up, compose, pod] = three_ways(profile, RunOptions::default(), &["agent", "sh", "-c", script]);
    for seen in [&up, &compose, &pod] {
        let (builder, agent) = (&seen[0], &seen[1]);
        assert_eq!(agent.command, ["sh", "-c", script]);
        assert_eq!(builder.env["SECRET"], "${SECRET}");
        assert_eq!(builder.env["K"], "$(K8S)");
        assert_eq!((builder.env["P"].as_str(), builder.env["E"].as_str()), ("$$5", "$"));
        assert!(agent.mounts.contains_key("/m/$(X)") && builder.mounts.contains_key("/cache/npm"));
    }
    assert_eq!(up[0].health.as_deref(), Some(&["CMD-SHELL".to_owned(), r#"test -n "$HOME""#.into()][..]));
    assert_eq!(compose[0].health, up[0].health);
    assert_eq!(up[0].image, "img$x");
    assert_eq!(compose[0].image, "img$x");
}
