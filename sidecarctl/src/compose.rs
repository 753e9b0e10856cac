//! `sidecarctl compose`: the same run as a compose file. Services `builder-RT` with the binds, `cap_drop`,
//! `security_opt`, user, builder group, labels and a healthcheck (interval 2 s, timeout 3 s, retries from
//! `ready_timeout`) that `up` gives the containers, and no restart policy; the agent with
//! `depends_on: {builder-RT: {condition: service_healthy}}` and an init; the token as a compose secret.
//!
//! The file is the same on every machine: the caller's uid is `${SIDECAR_UID:-1000}:${SIDECAR_GID:-1000}` (from
//! `.env`), the workspace `${WORKSPACE:-<--workspace as written, else .>}`. It has no `build:` sections: like `up`
//! and the Pod, it runs images, which are built once (docs/images.md) and then shared by all three; the header
//! lists the build commands for this project's images.

use serde_norway::Value;

use crate::emit::{self, list, map, opt, s, strings, EmitOptions};
use crate::model::{Run, Sidecar};
use crate::names::{LABEL_ROLE, LABEL_RUNTIME, ROLE_AGENT, ROLE_BUILDER};
use crate::spec::{caller_home, BUILDER_GROUP};
use crate::yaml::{self, NotRoundTrip};

const SECRET: &str = "sidecar_token";
const SECRET_PATH: &str = "/run/secrets/sidecar_token";
const USER: &str = "${SIDECAR_UID:-1000}:${SIDECAR_GID:-1000}";

pub fn emit(run: &Run, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    let workspace_text = emit::workspace_text(&options.run);
    let workspace = format!("${{WORKSPACE:-{workspace_text}}}");
    let bind = |v: &crate::model::Volume| {
        let source = emit::bind_source(run, &options.run, v, &workspace);
        format!("{source}:{}{}", v.target, if v.read_only { ":ro" } else { "" })
    };
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
        let as_caller = sidecar.run_as_caller_uid;
        let service = map([
            ("image", s(sidecar.image.clone())),
            ("command", strings(&sidecar.command)),
            ("user", opt(as_caller.then(|| s(USER)))),
            ("group_add", opt(as_caller.then(|| list([s(BUILDER_GROUP)])))),
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

    let cmd = options.agent_command();
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
        ("image", s(options.agent_image())),
        ("command", opt((!cmd.is_empty()).then(|| strings(cmd)))),
        ("init", true.into()),
        ("working_dir", opt(workdir)),
        ("environment", opt((!env.is_empty()).then_some(Value::Mapping(env)))),
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
        ("networks", map([("builders", Value::Mapping(Default::default()))])),
        ("volumes", opt((!volumes.is_empty()).then_some(Value::Mapping(volumes)))),
        ("secrets", opt(token.then(|| map([(SECRET, map([("file", s("./sidecar-token"))]))])))),
    ]);
    Ok(format!("{}\n{}", header(run, options, &workspace_text), yaml::render(&document, &comment)?))
}

/// Sidecarctl's role and runtime labels, so `docker ps --filter label=sidecarctl.role=build-sidecar` finds the
/// builders. Not `sidecarctl.managed`: compose owns these containers, and `sidecarctl ps`/`down` (which select
/// that label) must not list or remove what they did not start.
fn labels(role: &str, sidecar: Option<&Sidecar>) -> Value {
    map([(LABEL_ROLE, s(role)), (LABEL_RUNTIME, opt(sidecar.map(|sc| s(sc.runtime.to_string()))))])
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
        ["volumes"] => "The caches: `docker compose down` keeps them (`down --volumes` would not).",
        _ => return None,
    };
    Some(text.to_owned())
}

fn header(run: &Run, options: &EmitOptions, workspace_text: &str) -> String {
    let mut text = format!(
        "Generated by `{}`:\n\
         the run `sidecarctl up` starts with the same options, as compose services. To change it, change the\n\
         options and regenerate.\n\n",
        options.generator()
    );
    let builds = emit::build_commands(run, options.agent_image());
    if builds.is_empty() {
        text.push_str("The images must exist first (compose pulls a missing one).\n");
    } else {
        text.push_str("Build the images first, from a sidecar-exec checkout (docs/images.md, \"Building\"):\n");
        for line in builds {
            text.push_str(&format!("  {}\n", line.replace('\n', "\n  ")));
        }
    }
    text.push_str("Then, in the folder of this file, as the user who will own the files:\n");
    if run.sidecars.iter().any(|sc| sc.run_as_caller_uid) {
        text.push_str("  printf 'SIDECAR_UID=%s\\nSIDECAR_GID=%s\\n' \"$(id -u)\" \"$(id -g)\" > .env   # the builders run as you\n");
    }
    if run.token {
        text.push_str(
            "  (umask 077; head -c 32 /dev/urandom | base64 > sidecar-token)   # the shared bearer token, mode 0600\n",
        );
    }
    if workspace_text != "." {
        text.push_str(&format!(
            "  mkdir -p {}   # or WORKSPACE=/your/project in .env; it must exist first\n",
            protocol::shell::word(workspace_text)
        ));
    }
    text.push_str("  docker compose up -d\n");
    if !run.sidecars.is_empty() {
        let tries: Vec<&str> = run.sidecars.iter().map(|sc| emit::version_command(sc.runtime)).collect();
        text.push_str(&format!("  docker compose exec agent sh -c '{}'\n", tries.join("; ")));
    }
    text.push('\n');
    if workspace_text != "." {
        text.push_str(
            "The workspace must exist before `up`: the engine creates a missing bind source as root, and the builders\n\
             (running as you) then cannot write it; exec-server logs a warning naming the uid and the folder.\n",
        );
    }
    if !run.sidecars.is_empty() {
        text.push_str(
            "`exec` finds the wrappers because the agent image has their folder on PATH (use `sh -c`; a login shell\n\
             gets it from /etc/profile.d). The builders publish no port. The agent starts once every builder reports\n\
             healthy.\n",
        );
    }
    emit::comment_block(&text)
}
