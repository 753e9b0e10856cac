//! `sidecarctl kube`: the run's plan for a Pod ([`Target::Pod`]: each builder on its own port, reached at
//! `http://127.0.0.1:PORT`) as one Pod, the builders as native sidecars (init containers with
//! `restartPolicy: Always`, Kubernetes 1.29+), plus a NetworkPolicy that admits no other pod. Probes on `/health`
//! (the startup probe allows `ready_timeout`); the token from the Secret `sidecar-token` (key `token`); the
//! workspace, caches and any other volume are `emptyDir` volumes (swap in PVCs for persistence); resource requests
//! and limits a person edits to fit.
//!
//! There is no caller on a cluster: every container runs as uid/gid 1000 (the images' users), with `fsGroup` the
//! images' builder group, which shares the cache volumes as `group_add` does in compose. The agent's init is the
//! agent image's own (tini): a Pod has no `init: true`.

use serde_norway::Value;

use super::emit::{self, list, map, opt, s, EmitOptions};
use super::yaml::{self, NotRoundTrip};
use crate::model::{RunConfig, Volume, VolumeSource};
use crate::plan::{Container, Plan, Role, Target, BUILDER_GROUP, HEALTH_INTERVAL, HEALTH_TIMEOUT};

const POD_LABEL: &str = "sidecar-exec-agent";
/// The Secret's volume; the plan's token path is its file `token`.
const TOKEN_VOLUME: &str = "token";

/// The Pod's volume for a source: `workspace` for the workspace (a folder under it is a `subPath`), a volume's or
/// a host path's name as a DNS label otherwise (a Pod cannot bind this machine's paths: each is an `emptyDir`).
fn volume_name(source: &VolumeSource) -> (String, Option<String>) {
    let label = |text: &str| -> String {
        text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
    };
    match source {
        VolumeSource::Workspace { under } => ("workspace".to_owned(), (!under.is_empty()).then(|| under.clone())),
        VolumeSource::Named(name) => (label(name), None),
        VolumeSource::Host(path) => (format!("host{}", label(&path.display().to_string())), None),
    }
}

/// `text` as Kubernetes reads it back in `command`, `args` and `env[].value`, where `$(VAR)` is expanded: every `$`
/// doubled (`$$` is its literal `$`, so `$(` can never start a reference, and a `$$` written stays two). Other
/// fields (image, workingDir, mountPath) are not expanded and are written as they are.
pub fn escape(text: &str) -> String {
    text.replace('$', "$$")
}

pub fn emit(run: &RunConfig, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    let plan = Plan::new(run, options.agent_request(), Target::Pod);
    let group: u64 = BUILDER_GROUP.parse().expect("a numeric gid");
    let init: Vec<Value> = plan.builders.iter().map(container).collect();

    let mut volumes: Vec<Value> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for mount in plan.containers().flat_map(|c| &c.mounts) {
        let (name, _) = volume_name(&mount.source);
        if !seen.contains(&name) {
            volumes.push(map([("name", s(name.clone())), ("emptyDir", Value::Mapping(Default::default()))]));
            seen.push(name);
        }
    }
    if plan.agent.token.is_some() {
        volumes.push(map([
            ("name", s(TOKEN_VOLUME)),
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
                ("containers", list([container(&plan.agent)])),
                ("volumes", Value::Sequence(volumes)),
            ]),
        ),
    ]);
    let mut text = format!("{}\n{}", header(&plan, options), yaml::render(&pod, &comment)?);
    if !plan.builders.is_empty() {
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

/// One planned container: a builder as a native sidecar (`restartPolicy: Always`) with its port and probes on
/// `/health`, or the agent; both with their resources and hardening.
fn container(container: &Container) -> Value {
    let env: Vec<Value> = container
        .env
        .iter()
        .map(|(name, value)| map([("name", s(name.clone())), ("value", s(escape(value)))]))
        .collect();
    let mut mounts: Vec<Value> = container
        .mounts
        .iter()
        .map(|Volume { source, target, read_only }| {
            let (name, sub_path) = volume_name(source);
            map([
                ("name", s(name)),
                ("mountPath", s(target.clone())),
                ("subPath", opt(sub_path.map(s))),
                ("readOnly", opt(read_only.then_some(true.into()))),
            ])
        })
        .collect();
    if let Some(path) = container.token {
        let folder = path.rsplit_once('/').map_or(path, |(folder, _)| folder);
        mounts.push(map([("name", s(TOKEN_VOLUME)), ("mountPath", s(folder)), ("readOnly", true.into())]));
    }
    let resources = |cpu: &str, memory: &str, limit: Option<&str>| {
        map([
            ("requests", map([("cpu", s(cpu)), ("memory", s(memory))])),
            ("limits", opt(limit.map(|l| map([("memory", s(l))])))),
        ])
    };
    let hardened =
        map([("allowPrivilegeEscalation", false.into()), ("capabilities", map([("drop", list([s("ALL")]))]))]);
    let command = opt((!container.command.is_empty()).then(|| list(container.command.iter().map(|a| s(escape(a))))));
    let env = opt((!env.is_empty()).then_some(Value::Sequence(env)));
    match (container.role, container.port, &container.health) {
        (Role::Builder(runtime), Some(port), Some(health)) => {
            let probe = |extra: Vec<(&str, Value)>| {
                let mut m = serde_norway::Mapping::new();
                m.insert(s("httpGet"), map([("path", s("/health")), ("port", (port as u64).into())]));
                for (k, v) in extra {
                    m.insert(s(k), v);
                }
                Value::Mapping(m)
            };
            let period = HEALTH_INTERVAL.as_secs();
            let timeout = HEALTH_TIMEOUT.as_secs();
            map([
                ("name", s(container.name.clone())),
                ("image", s(container.image.clone())),
                ("imagePullPolicy", s("IfNotPresent")),
                ("restartPolicy", s("Always")),
                ("args", command),
                ("env", env),
                ("ports", list([map([("name", s(runtime.to_string())), ("containerPort", (port as u64).into())])])),
                (
                    "startupProbe",
                    probe(vec![("periodSeconds", period.into()), ("failureThreshold", health.retries().into())]),
                ),
                ("readinessProbe", probe(vec![("periodSeconds", 5u64.into()), ("timeoutSeconds", timeout.into())])),
                (
                    "livenessProbe",
                    probe(vec![
                        ("periodSeconds", 10u64.into()),
                        ("timeoutSeconds", timeout.into()),
                        ("failureThreshold", 3u64.into()),
                    ]),
                ),
                ("resources", resources("250m", "256Mi", Some("2Gi"))),
                ("securityContext", hardened),
                ("volumeMounts", Value::Sequence(mounts)),
            ])
        }
        _ => map([
            ("name", s(container.name.clone())),
            ("image", s(container.image.clone())),
            ("imagePullPolicy", s("IfNotPresent")),
            ("args", command),
            ("workingDir", opt(container.working_dir.clone().map(s))),
            ("env", env),
            ("resources", resources("100m", "128Mi", None)),
            ("securityContext", hardened),
            ("volumeMounts", Value::Sequence(mounts)),
        ]),
    }
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

fn header(plan: &Plan, options: &EmitOptions) -> String {
    let mut text = format!(
        "Generated by `{}`:\n\
         the run `sidecarctl up` starts with the same options, as one Pod whose builders are native sidecars\n\
         (Kubernetes 1.29 or later). A pod is one network namespace, so each builder listens on its own port and the\n\
         agent reaches it on 127.0.0.1. To change it, change the options and regenerate.\n\n",
        options.generator()
    );
    if plan.agent.token.is_some() {
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
