//! `sidecarctl compose`: the same run as a compose file. Services `builder-RT` with the binds, `cap_drop`,
//! `security_opt`, user, labels and a healthcheck (interval 2 s, timeout 3 s, retries from `ready_timeout`) that
//! `up` gives the containers; the agent with `depends_on: {builder-RT: {condition: service_healthy}}`; the token as
//! a compose secret. The caller's uid is `${SIDECAR_UID}`/`${SIDECAR_GID}` (default 1000) and the workspace
//! `${WORKSPACE}` (default: `--workspace` as written, else `.`), so the file is the same on every machine.

use serde_norway::Value;

use crate::emit::{self, list, map, opt, s, strings, EmitOptions};
use crate::model::{Run, Sidecar, Volume};
use crate::names::{LABEL_MANAGED, LABEL_ROLE, LABEL_RUNTIME, ROLE_AGENT, ROLE_BUILDER};
use crate::spec::caller_home;

const SECRET: &str = "sidecar_token";
const SECRET_PATH: &str = "/run/secrets/sidecar_token";
const USER: &str = "${SIDECAR_UID:-1000}:${SIDECAR_GID:-1000}";

pub fn emit(run: &Run, options: &EmitOptions) -> String {
    let workspace = format!("${{WORKSPACE:-{}}}", emit::workspace_text(&options.run));
    let source = |v: &Volume| {
        if v.source == run.workspace.display().to_string() {
            workspace.clone()
        } else {
            v.source.replace(&run.workspace.display().to_string(), &workspace)
        }
    };
    let bind = |v: &Volume| format!("{}:{}{}", source(v), v.target, if v.read_only { ":ro" } else { "" });
    let hardening = || {
        [
            ("cap_drop", list([s("ALL")])),
            ("security_opt", list([s("no-new-privileges:true")])),
            ("networks", list([s("builders")])),
        ]
    };
    let ulimits = || {
        if run.ulimits.is_empty() {
            return Value::Null;
        }
        let mut limits = serde_norway::Mapping::new();
        for u in &run.ulimits {
            limits.insert(s(u.name.clone()), map([("soft", u.soft.into()), ("hard", u.hard.into())]));
        }
        Value::Mapping(limits)
    };
    let token = run.token;
    let secrets = || if token { list([s(SECRET)]) } else { Value::Null };

    let mut services = serde_norway::Mapping::new();
    for sidecar in &run.sidecars {
        let mut env = serde_norway::Mapping::new();
        for (k, v) in &sidecar.env {
            env.insert(s(k.clone()), s(v.clone()));
        }
        env.insert(s("EXEC_SERVER_PORT"), s(sidecar.port.to_string()));
        if sidecar.run_as_caller_uid {
            env.insert(s("HOME"), s(caller_home(sidecar)));
        }
        if token {
            env.insert(s("EXEC_SERVER_TOKEN_FILE"), s(SECRET_PATH));
        }
        let mut volumes: Vec<String> = run.workspace_volume(sidecar).map(bind).into_iter().collect();
        volumes.extend(sidecar.cache_volumes.iter().cloned());
        let [cap, sec, net] = hardening();
        let service = map([
            ("image", s(sidecar.image.clone())),
            ("command", strings(&sidecar.command)),
            ("user", opt(sidecar.run_as_caller_uid.then(|| s(USER)))),
            ("environment", Value::Mapping(env)),
            ("volumes", strings(&volumes)),
            ("secrets", secrets()),
            ("ulimits", ulimits()),
            cap,
            sec,
            net,
            ("labels", labels(ROLE_BUILDER, Some(sidecar))),
            (
                "healthcheck",
                map([
                    ("test", strings(&emit::health_test(sidecar))),
                    ("interval", s("2s")),
                    ("timeout", s("3s")),
                    ("retries", emit::retries(sidecar).into()),
                ]),
            ),
        ]);
        services.insert(s(sidecar.runtime.alias()), service);
    }

    let (image, cmd) = options.agent.split_first().expect("clap requires AGENT_IMAGE");
    let mut env = serde_norway::Mapping::new();
    if !run.sidecars.is_empty() {
        env.insert(s("BUILD_SIDECARS"), s(run.build_sidecars_json(Sidecar::internal_url)));
    }
    let passthrough = run.env_passthrough();
    if !passthrough.is_empty() {
        env.insert(s("SIDECAR_ENV_PASSTHROUGH"), s(passthrough));
    }
    if token {
        env.insert(s("SIDECAR_TOKEN_FILE"), s(SECRET_PATH));
    }
    let mut depends = serde_norway::Mapping::new();
    for sidecar in &run.sidecars {
        depends.insert(s(sidecar.runtime.alias()), map([("condition", s("service_healthy"))]));
    }
    let workdir = run.sidecars.first().map(|sc| s(sc.workspace_target.clone()));
    let [cap, sec, net] = hardening();
    let agent = map([
        ("image", s(image.clone())),
        ("command", opt((!cmd.is_empty()).then(|| strings(cmd)))),
        ("working_dir", opt(workdir)),
        ("environment", Value::Mapping(env)),
        ("volumes", strings(&run.volumes.iter().map(bind).collect::<Vec<_>>())),
        ("secrets", secrets()),
        ("ulimits", ulimits()),
        cap,
        sec,
        net,
        ("labels", labels(ROLE_AGENT, None)),
        ("depends_on", opt((!depends.is_empty()).then_some(Value::Mapping(depends)))),
    ]);
    services.insert(s("agent"), agent);

    let mut volumes = serde_norway::Mapping::new();
    for name in emit::named_volumes(run) {
        volumes.insert(s(name), Value::Mapping(Default::default()));
    }
    let document = map([
        ("services", Value::Mapping(services)),
        // Private: nothing is published; builders still reach package registries (add `internal: true` to cut them off).
        ("networks", map([("builders", Value::Mapping(Default::default()))])),
        ("volumes", opt((!volumes.is_empty()).then_some(Value::Mapping(volumes)))),
        ("secrets", opt(token.then(|| map([(SECRET, map([("file", s("./sidecar-token"))]))])))),
    ]);
    let header = "# Generated by `sidecarctl compose`: the run `sidecarctl up` starts, as compose services.\n\
                  #   printf 'SIDECAR_UID=%s\\nSIDECAR_GID=%s\\n' \"$(id -u)\" \"$(id -g)\" > .env   # run as the caller\n\
                  #   head -c 32 /dev/urandom | base64 > sidecar-token                          # the bearer token\n\
                  #   docker compose up -d && docker compose exec agent sh\n";
    emit::yaml(if token { header } else { "# Generated by `sidecarctl compose`.\n" }, &document)
}

fn labels(role: &str, sidecar: Option<&Sidecar>) -> Value {
    map([
        (LABEL_MANAGED, s("true")),
        (LABEL_ROLE, s(role)),
        (LABEL_RUNTIME, opt(sidecar.map(|sc| s(sc.runtime.to_string())))),
    ])
}
