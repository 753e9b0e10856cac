//! `sidecarctl kube`: the same run as one Pod, the builders as native sidecars (init containers with
//! `restartPolicy: Always`, Kubernetes 1.29+). A pod is one network namespace, so each builder needs its own port:
//! the configured ports when they are distinct, else 8081, 8082, … in order; the agent reaches them at
//! `http://127.0.0.1:PORT`. Probes on `/health`; the token from the Secret `sidecar-token` (key `token`); caches
//! and the workspace are `emptyDir` volumes (swap in PVCs for persistence).

use std::collections::BTreeSet;

use serde_norway::Value;

use crate::emit::{self, list, map, opt, s, strings, EmitOptions};
use crate::model::Run;

const TOKEN_DIR: &str = "/run/secrets/sidecar";

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

pub fn emit(run: &Run, options: &EmitOptions) -> String {
    let ports = ports(run);
    let token = run.token;
    let hardened =
        || map([("allowPrivilegeEscalation", false.into()), ("capabilities", map([("drop", list([s("ALL")]))]))]);
    let mount = |name: &str, path: &str| map([("name", s(name)), ("mountPath", s(path))]);
    let token_mount = || map([("name", s("token")), ("mountPath", s(TOKEN_DIR)), ("readOnly", true.into())]);
    let probe = |port: u16, extra: Vec<(&str, Value)>| {
        let mut m = serde_norway::Mapping::new();
        m.insert(s("httpGet"), map([("path", s("/health")), ("port", (port as u64).into())]));
        for (k, v) in extra {
            m.insert(s(k), v);
        }
        Value::Mapping(m)
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
        let mut env: Vec<Value> =
            sidecar.env.iter().map(|(k, v)| map([("name", s(k.clone())), ("value", s(v.clone()))])).collect();
        env.push(map([("name", s("EXEC_SERVER_PORT")), ("value", s(port_text.clone()))]));
        if token {
            env.push(map([("name", s("EXEC_SERVER_TOKEN_FILE")), ("value", s(format!("{TOKEN_DIR}/token")))]));
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
            ("securityContext", hardened()),
            ("volumeMounts", Value::Sequence(mounts)),
        ]));
    }

    let (image, cmd) = options.agent.split_first().expect("clap requires AGENT_IMAGE");
    let mut env = Vec::new();
    if !run.sidecars.is_empty() {
        let urls = run.build_sidecars_json(|sc| {
            let i = run.sidecars.iter().position(|x| x.runtime == sc.runtime).unwrap_or(0);
            format!("http://127.0.0.1:{}", ports[i])
        });
        env.push(map([("name", s("BUILD_SIDECARS")), ("value", s(urls))]));
    }
    let passthrough = run.env_passthrough();
    if !passthrough.is_empty() {
        env.push(map([("name", s("SIDECAR_ENV_PASSTHROUGH")), ("value", s(passthrough))]));
    }
    if token {
        env.push(map([("name", s("SIDECAR_TOKEN_FILE")), ("value", s(format!("{TOKEN_DIR}/token")))]));
    }
    let workspace_target = run.sidecars.first().map_or("/workspace".to_owned(), |sc| sc.workspace_target.clone());
    let mut mounts = vec![mount("workspace", &workspace_target)];
    if token {
        mounts.push(token_mount());
    }
    let agent = map([
        ("name", s("agent")),
        ("image", s(image.clone())),
        ("imagePullPolicy", s("IfNotPresent")),
        ("args", opt((!cmd.is_empty()).then(|| strings(cmd)))),
        ("env", opt((!env.is_empty()).then_some(Value::Sequence(env)))),
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
        (
            "metadata",
            map([("name", s("agent")), ("labels", map([("app.kubernetes.io/name", s("sidecar-exec-agent"))]))]),
        ),
        (
            "spec",
            map([
                (
                    "securityContext",
                    map([
                        ("runAsNonRoot", true.into()),
                        ("runAsUser", 1000u64.into()),
                        ("runAsGroup", 1000u64.into()),
                        ("fsGroup", 1000u64.into()),
                        ("seccompProfile", map([("type", s("RuntimeDefault"))])),
                    ]),
                ),
                ("initContainers", opt((!init.is_empty()).then_some(Value::Sequence(init)))),
                ("containers", list([agent])),
                ("volumes", Value::Sequence(volumes)),
            ]),
        ),
    ]);
    let header = "# Generated by `sidecarctl kube`: the run `sidecarctl up` starts, as one Pod (Kubernetes 1.29+).\n\
                  #   kubectl create secret generic sidecar-token --from-literal=token=\"$(head -c 32 /dev/urandom | base64)\"\n\
                  #   kubectl apply -f -\n";
    emit::yaml(if token { header } else { "# Generated by `sidecarctl kube`.\n" }, &pod)
}
