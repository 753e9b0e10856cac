use super::*;
use crate::model::{Run, Ulimit};
use crate::options::RunOptions;
use crate::profile::Profile;

fn run(yaml: &str, options: RunOptions) -> Run {
    Run::build(&options, Profile::parse(yaml, "t").unwrap(), &std::env::temp_dir()).unwrap()
}

fn context<'a>(run: &'a Run, id: &'a RunName) -> Context<'a> {
    Context { run, id, caller: "2345:2346".into(), token_dir: Some("/run/user/2345/sidecarctl/r1".into()) }
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

#[test]
fn a_builder_is_hardened_private_and_labelled() {
    let mut r = run(PROFILE, RunOptions::default());
    r.ulimits = vec![Ulimit { name: "nofile".into(), soft: 4096, hard: 4096 }];
    let id = RunName::named("r1").unwrap();
    let ctx = context(&r, &id);
    let body = builder(&ctx, &r.sidecars[0], Some("/host/token"));
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
    assert!(body.exposed_ports.is_none());

    // Not as the caller: the image's user, no HOME override; a command override is kept as written.
    let body = builder(&ctx, &r.sidecars[1], None);
    assert_eq!(body.user, None);
    assert_eq!(body.host_config.as_ref().unwrap().group_add, None, "the image's user has the group already");
    assert_eq!(body.env.unwrap(), ["EXEC_SERVER_PORT=8080"]);
    assert_eq!(body.cmd.unwrap().last().map(String::as_str), Some("--verbose"));
}

#[test]
fn the_agent_gets_the_contract_the_token_and_the_workspace() {
    let r = run(PROFILE, RunOptions::default());
    let id = RunName::named("r1").unwrap();
    let ctx = context(&r, &id);
    let spec = AgentSpec {
        image: "sidecar-agent".into(),
        cmd: vec!["sh".into(), "-c".into(), "exit 7".into()],
        env: vec!["A=1".into()],
        tty: false,
        stdin: true,
        ..Default::default()
    };
    let body = agent(&ctx, &spec, Some("/host/token-1000"));
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
