//! `sidecarctl kube`: the same run as one Pod, the builders as native sidecars (init containers with
//! `restartPolicy: Always`, Kubernetes 1.29+), plus a NetworkPolicy that admits no other pod. A pod is one network
//! namespace, so each builder needs its own port: the configured ports when they are distinct, else 8081, 8082, …
//! in order; the agent reaches them at `http://127.0.0.1:PORT`. Probes on `/health` (the startup probe allows
//! `ready_timeout`); the token from the Secret `sidecar-token` (key `token`); caches and the workspace are
//! `emptyDir` volumes (swap in PVCs for persistence); resource requests and limits a person edits to fit.
//!
//! There is no caller on a cluster: every container runs as uid/gid 1000 (the images' users), with `fsGroup` the
//! images' builder group, which shares the cache volumes as `group_add` does in compose. The agent's init is the
//! agent image's own (tini): a Pod has no `init: true`.

use std::collections::BTreeSet;

use serde_norway::Value;

use crate::emit::{self, list, map, opt, s, strings, EmitOptions};
use crate::model::Run;
use crate::spec::BUILDER_GROUP;
use crate::yaml::{self, NotRoundTrip};

const TOKEN_DIR: &str = "/run/secrets/sidecar";
const POD_LABEL: &str = "sidecar-exec-agent";

/// The port each builder listens on inside the pod.
pub fn ports(run: &Run) -> Vec<u16> {
    let configured: BTreeSet<u16> = run.sidecars.iter().map(|s| s.port).collect();
    if configured.len() == run.sidecars.len() {
        run.sidecars.iter().map(|s| s.port).collect()
    } else {
        (0..run.sidecars.len()).map(|i| 8081 + i as u16).collect()
    }
}

fn volume_name(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}

pub fn emit(run: &Run, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    let ports = ports(run);
    let token = run.token;
    let group: u64 = BUILDER_GROUP.parse().expect("a numeric gid");
    let hardened =
        || map([("allowPrivilegeEscalation", false.into()), ("capabilities", map([("drop", list([s("ALL")]))]))]);
    let mount = |name: &str, path: &str| map([("name", s(name)), ("mountPath", s(path))]);
    let token_mount = || map([("name", s("token")), ("mountPath", s(TOKEN_DIR)), ("readOnly", true.into())]);
    let env_var = |name: &str, value: String| map([("name", s(name)), ("value", s(value))]);
    let probe = |port: u16, extra: Vec<(&str, Value)>| {
        let mut m = serde_norway::Mapping::new();
        m.insert(s("httpGet"), map([("path", s("/health")), ("port", (port as u64).into())]));
        for (k, v) in extra {
            m.insert(s(k), v);
        }
        Value::Mapping(m)
    };
    let resources = |cpu: &str, memory: &str, limit: Option<&str>| {
        map([
            ("requests", map([("cpu", s(cpu)), ("memory", s(memory))])),
            ("limits", opt(limit.map(|l| map([("memory", s(l))])))),
        ])
    };

    let mut init = Vec::new();
    for (sidecar, port) in run.sidecars.iter().zip(&ports) {
        let port_text = port.to_string();
        let default_cmd = crate::model::Sidecar::defaults(sidecar.runtime, 1.0).command;
        // The default command, on the pod's port; an override is the user's, as written.
        let args: Vec<String> = if sidecar.command[..] == default_cmd[..]
            || sidecar.command == ["exec-server", "-port", &sidecar.port.to_string(), "-cwd", &sidecar.workspace_target]
        {
            ["exec-server", "-port", &port_text, "-cwd", &sidecar.workspace_target].map(str::to_owned).to_vec()
        } else {
            sidecar.command.clone()
        };
        let mut env: Vec<Value> = sidecar.env.iter().map(|(k, v)| env_var(k, v.clone())).collect();
        env.push(env_var("EXEC_SERVER_PORT", port_text.clone()));
        if token {
            env.push(env_var("EXEC_SERVER_TOKEN_FILE", format!("{TOKEN_DIR}/token")));
        }
        let mut mounts = vec![mount("workspace", &sidecar.workspace_target)];
        if token {
            mounts.push(token_mount());
        }
        for cache in &sidecar.cache_volumes {
            if let Some((name, path)) = cache.split_once(':') {
                mounts.push(mount(&volume_name(name), path.split(':').next().unwrap_or(path)));
            }
        }
        init.push(map([
            ("name", s(sidecar.runtime.alias())),
            ("image", s(sidecar.image.clone())),
            ("imagePullPolicy", s("IfNotPresent")),
            ("restartPolicy", s("Always")),
            ("args", strings(&args)),
            ("env", Value::Sequence(env)),
            (
                "ports",
                list([map([("name", s(sidecar.runtime.to_string())), ("containerPort", (*port as u64).into())])]),
            ),
            (
                "startupProbe",
                probe(*port, vec![("periodSeconds", 2u64.into()), ("failureThreshold", emit::retries(sidecar).into())]),
            ),
            ("readinessProbe", probe(*port, vec![("periodSeconds", 5u64.into()), ("timeoutSeconds", 3u64.into())])),
            (
                "livenessProbe",
                probe(
                    *port,
                    vec![
                        ("periodSeconds", 10u64.into()),
                        ("timeoutSeconds", 3u64.into()),
                        ("failureThreshold", 3u64.into()),
                    ],
                ),
            ),
            ("resources", resources("250m", "256Mi", Some("2Gi"))),
            ("securityContext", hardened()),
            ("volumeMounts", Value::Sequence(mounts)),
        ]));
    }

    let cmd = options.agent_command();
    let mut env = Vec::new();
    if !run.sidecars.is_empty() {
        let urls = run.build_sidecars_json(|sc| {
            let i = run.sidecars.iter().position(|x| x.runtime == sc.runtime).unwrap_or(0);
            format!("http://127.0.0.1:{}", ports[i])
        });
        env.push(env_var("BUILD_SIDECARS", urls));
    }
    let passthrough = run.env_passthrough();
    if !passthrough.is_empty() {
        env.push(env_var("SIDECAR_ENV_PASSTHROUGH", passthrough));
    }
    if token {
        env.push(env_var("SIDECAR_TOKEN_FILE", format!("{TOKEN_DIR}/token")));
    }
    let workspace_target = run.sidecars.first().map_or("/workspace".to_owned(), |sc| sc.workspace_target.clone());
    let mut mounts = vec![mount("workspace", &workspace_target)];
    if token {
        mounts.push(token_mount());
    }
    let agent = map([
        ("name", s("agent")),
        ("image", s(options.agent_image())),
        ("imagePullPolicy", s("IfNotPresent")),
        ("args", opt((!cmd.is_empty()).then(|| strings(cmd)))),
        ("workingDir", s(workspace_target.clone())),
        ("env", opt((!env.is_empty()).then_some(Value::Sequence(env)))),
        ("resources", resources("100m", "128Mi", None)),
        ("securityContext", hardened()),
        ("volumeMounts", Value::Sequence(mounts)),
    ]);

    let mut volumes = vec![map([("name", s("workspace")), ("emptyDir", Value::Mapping(Default::default()))])];
    for name in emit::named_volumes(run) {
        volumes.push(map([("name", s(volume_name(&name))), ("emptyDir", Value::Mapping(Default::default()))]));
    }
    if token {
        volumes.push(map([
            ("name", s("token")),
            ("secret", map([("secretName", s("sidecar-token")), ("defaultMode", 0o440u64.into())])),
        ]));
    }
    let pod = map([
        ("apiVersion", s("v1")),
        ("kind", s("Pod")),
        ("metadata", map([("name", s("agent")), ("labels", map([("app.kubernetes.io/name", s(POD_LABEL))]))])),
        (
            "spec",
            map([
                (
                    "securityContext",
                    map([
                        ("runAsNonRoot", true.into()),
                        ("runAsUser", 1000u64.into()),
                        ("runAsGroup", 1000u64.into()),
                        ("fsGroup", group.into()),
                        ("seccompProfile", map([("type", s("RuntimeDefault"))])),
                    ]),
                ),
                ("initContainers", opt((!init.is_empty()).then_some(Value::Sequence(init)))),
                ("containers", list([agent])),
                ("volumes", Value::Sequence(volumes)),
            ]),
        ),
    ]);
    let mut text = format!("{}\n{}", header(run, options), yaml::render(&pod, &comment)?);
    if !run.sidecars.is_empty() {
        let policy = map([
            ("apiVersion", s("networking.k8s.io/v1")),
            ("kind", s("NetworkPolicy")),
            ("metadata", map([("name", s("agent-no-ingress"))])),
            (
                "spec",
                map([
                    ("podSelector", map([("matchLabels", map([("app.kubernetes.io/name", s(POD_LABEL))]))])),
                    ("policyTypes", list([s("Ingress")])),
                    ("ingress", list(Vec::<Value>::new())),
                ]),
            ),
        ]);
        text.push_str("---\n");
        text.push_str(&emit::comment_block(
            "The builders listen on the pod's IP too (the kubelet's HTTP probes come from outside the pod): no other\n\
             pod may connect to them. (Kubelet probes are not subject to NetworkPolicy.)",
        ));
        text.push_str(&yaml::render(&policy, &|_| None)?);
    }
    Ok(text)
}

fn comment(path: &[&str]) -> Option<String> {
    let text = match path {
        ["spec", "securityContext", "fsGroup"] => {
            "Also every container's supplementary group and the volumes' group (setgid): the images' builder group,\n\
             so cache folders stay group-writable (the builders run commands with umask 0002)."
        }
        ["spec", "initContainers"] => {
            "Native sidecars (restartPolicy: Always): started, and healthy, before the agent; stopped after it."
        }
        ["spec", "initContainers", "0", "resources"] | ["spec", "containers", "0", "resources"] => {
            "Fit these to your builds."
        }
        ["spec", "containers", "0", "args"] => {
            "The agent's command (what follows AGENT_IMAGE): replace it with your agent. The image's entrypoint\n\
             (under tini, so SIGTERM ends it at once) writes the wrappers first, then execs it. `kubectl exec` finds\n\
             the wrappers too: their folder is on the image's PATH."
        }
        ["spec", "volumes"] => "emptyDir: the pod's own; use PersistentVolumeClaims to keep the workspace or caches.",
        ["spec", "volumes", _, "secret", "defaultMode"] => {
            "0440 in octal: the token is readable by its owner and group."
        }
        _ => return None,
    };
    Some(text.to_owned())
}

fn header(run: &Run, options: &EmitOptions) -> String {
    let mut text = format!(
        "Generated by `{}`:\n\
         the run `sidecarctl up` starts with the same options, as one Pod whose builders are native sidecars\n\
         (Kubernetes 1.29 or later). A pod is one network namespace, so each builder listens on its own port and the\n\
         agent reaches it on 127.0.0.1. To change it, change the options and regenerate.\n\n",
        options.generator()
    );
    if run.token {
        text.push_str(
            "  kubectl create secret generic sidecar-token --from-literal=token=\"$(head -c 32 /dev/urandom | base64)\"\n",
        );
    }
    text.push_str("  kubectl apply -f <this file>\n\n");
    text.push_str(
        "The cluster must be able to pull the images: push the ones built from images/Dockerfile (docs/images.md)\n\
         and name them with --builder-image RT=IMAGE and AGENT_IMAGE.\n",
    );
    emit::comment_block(&text)
}
