use super::*;
use crate::model::{VolumeSource, WorkspaceLookup};
use crate::options::RunOptions;
use crate::profile::Profile;

fn run(yaml: &str) -> RunConfig {
    let profile = Profile::parse(yaml, "t").unwrap();
    RunConfig::build(&RunOptions::default(), profile, &std::env::temp_dir(), WorkspaceLookup::Resolve).unwrap()
}

const TWO: &str =
    "tool_backends:\n  sidecars:\n    - {runtime: node, image: n, port: 9000, env_passthrough: [NPM_TOKEN], \
                   cache_volumes: [\"npm-cache:/cache/npm\", \"shared:/cache/x\"]}\n    \
                   - {runtime: python, image: p, ready_timeout: 5, cache_volumes: [\"shared:/cache/y\"]}\n";

#[test]
fn a_builder_gets_exec_server_on_its_port_the_callers_home_and_the_token() {
    let plan = Plan::new(&run(TWO), AgentRequest::default(), Deployment::Up);
    let node = &plan.builders[0];
    assert_eq!((node.role, node.name.as_str()), (Role::Builder(Runtime::Node), "builder-node"));
    assert_eq!(node.command, ["exec-server", "-port", "9000", "-cwd", "/workspace"]);
    assert_eq!(node.user, User::Caller);
    assert_eq!(node.groups, [BUILDER_GROUP]);
    assert_eq!(
        node.env,
        [
            ("EXEC_SERVER_PORT".to_owned(), "9000".to_owned()),
            ("HOME".to_owned(), "/workspace/.sidecarctl/home/node".to_owned()),
            ("EXEC_SERVER_TOKEN_FILE".to_owned(), "/run/secrets/sidecar-token".to_owned()),
        ]
    );
    let home = node.home.as_ref().expect("a HOME to create");
    assert_eq!(home.source, VolumeSource::Workspace { under: ".sidecarctl/home/node".into() });
    assert_eq!(home.target, "/workspace/.sidecarctl/home/node");
    let python = &plan.builders[1];
    let health = python.health.as_ref().unwrap();
    assert_eq!((health.retries(), health.test.as_ref()), (3, None), "5 s at one try per 2 s");
    assert_eq!(health.test_or_images(), IMAGE_HEALTH_TEST);
    assert_eq!(plan.named_volumes(), ["npm-cache", "shared"], "each once, in the order of first use");
}

#[test]
fn the_agent_gets_the_contract_unless_the_operator_sets_a_variable_itself() {
    let request = AgentRequest {
        image: "agent".into(),
        user: Some("1000:1000".into()),
        env: vec![("A".into(), "1".into()), ("SIDECAR_ENV_PASSTHROUGH".into(), "MINE".into())],
        ..Default::default()
    };
    let plan = Plan::new(&run(TWO), request, Deployment::Up);
    let agent = &plan.agent;
    assert_eq!(agent.user, User::Given("1000:1000".into()));
    let names: Vec<&str> = agent.env.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["A", "SIDECAR_ENV_PASSTHROUGH", "BUILD_SIDECARS", "SIDECAR_TOKEN_FILE"]);
    assert_eq!(agent.env_value("SIDECAR_ENV_PASSTHROUGH"), Some("MINE"), "the operator's value wins");
    assert_eq!(
        agent.env_value("BUILD_SIDECARS"),
        Some(
            r#"{"node":{"internal_url":"http://builder-node:9000"},"python":{"internal_url":"http://builder-python:8080"}}"#
        )
    );
    assert_eq!(agent.working_dir.as_deref(), Some("/workspace"));
}

#[test]
fn each_target_has_its_token_path_addresses_and_caller() {
    let r = run(TWO);
    let compose = Plan::new(&r, AgentRequest::default(), Deployment::Compose);
    assert_eq!(compose.agent.token, Some("/run/secrets/sidecar_token"));
    assert_eq!(compose.builders[0].user, User::Caller);
    let pod = Plan::new(&r, AgentRequest::default(), Deployment::Pod);
    assert_eq!(pod.agent.env_value("SIDECAR_TOKEN_FILE"), Some("/run/secrets/sidecar/token"));
    assert_eq!(
        pod.agent.env_value("BUILD_SIDECARS"),
        Some(r#"{"node":{"internal_url":"http://127.0.0.1:9000"},"python":{"internal_url":"http://127.0.0.1:8080"}}"#),
        "distinct ports are kept"
    );
    // No caller in a Pod: the image's user, no HOME folder, no extra group (the Pod's fsGroup does that).
    let node = &pod.builders[0];
    assert_eq!((&node.user, node.groups.is_empty(), node.home.is_none()), (&User::Image, true, true));
    assert!(node.env_value("HOME").is_none());
}

#[test]
fn no_token_no_builders_no_contract_variables() {
    let options = RunOptions { no_token: true, ..Default::default() };
    let r = RunConfig::build(&options, Profile::default(), &std::env::temp_dir(), WorkspaceLookup::Resolve).unwrap();
    let plan = Plan::new(&r, AgentRequest { image: "a".into(), ..Default::default() }, Deployment::Up);
    assert!(plan.builders.is_empty());
    assert!(plan.agent.env.is_empty() && plan.agent.token.is_none());
    assert_eq!(plan.agent.working_dir.as_deref(), Some(DEFAULT_WORKSPACE));
}

const DEFAULT_WORKSPACE: &str = crate::model::DEFAULT_WORKSPACE_TARGET;
