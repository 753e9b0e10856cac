//! `sidecarctl kube`: the run's plan for a Pod ([`Deployment::Pod`]: each builder on its own port, reached at
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
use crate::plan::{Container, Deployment, Plan, Role, BUILDER_GROUP, HEALTH_INTERVAL, HEALTH_TIMEOUT};

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

/// What `sidecarctl kube` prints (`--kind`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KubeKind {
    /// A Pod, the builders as native sidecars, and a NetworkPolicy that admits no other pod.
    #[default]
    Pod,
    /// An agent-sandbox SandboxTemplate (extensions.agents.x-k8s.io/v1beta1) of the same Pod, for fleets.
    SandboxTemplate,
    /// That SandboxTemplate and a SandboxWarmPool of it (`--replicas` sandboxes kept ready).
    WarmPool,
}

/// `sidecarctl kube`'s own flags, before the run's.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeOptions {
    /// What to print: `pod` (a Pod and its NetworkPolicy), `sandbox-template` (an agent-sandbox SandboxTemplate of
    /// that Pod, each sandbox with a token of its own) or `warm-pool` (the template and a SandboxWarmPool of it).
    #[arg(long, value_enum, default_value_t = KubeKind::Pod, env = "SIDECARCTL_KUBE_KIND")]
    pub kind: KubeKind,

    /// With --kind warm-pool: how many sandboxes the pool keeps ready (default 2).
    #[arg(long, value_name = "N", env = "SIDECARCTL_KUBE_REPLICAS")]
    pub replicas: Option<u32>,

    #[command(flatten)]
    pub emit: EmitOptions,
}

impl KubeOptions {
    /// The warm pool's size, or why `--replicas` does not apply.
    pub fn replicas(&self) -> Result<u32, String> {
        match (self.kind, self.replicas) {
            (KubeKind::WarmPool, replicas) => Ok(replicas.unwrap_or(2)),
            (_, None) => Ok(0),
            (kind, Some(_)) => Err(format!(
                "--replicas sizes a warm pool: add --kind warm-pool, or drop --replicas (--kind {})",
                clap::ValueEnum::to_possible_value(&kind).map_or_else(String::new, |v| v.get_name().to_owned())
            )),
        }
    }
}

/// The agent-sandbox API group and version the templates are written for (the CRDs' storage version).
pub const SANDBOX_API: &str = "extensions.agents.x-k8s.io/v1beta1";
/// The SandboxTemplate's name (a warm pool refers to it).
const TEMPLATE_NAME: &str = "sidecar-exec-agent";

/// Where a run's token comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenSource {
    /// The Secret `sidecar-token`, made once by hand (a Pod).
    Secret,
    /// Made in the pod at its start by an init container, into a memory-backed `emptyDir`: each sandbox of a
    /// template or a warm pool has its own token, which never leaves the pod. (The agent-sandbox CRDs on their main
    /// branch have no per-sandbox generated Secrets; one Secret would give a whole pool one token.)
    MadeInPod,
}

pub fn emit(run: &RunConfig, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    emit_kind(run, options, KubeKind::Pod, 0)
}

/// `sidecarctl kube --kind KIND`: the run as a Pod, a SandboxTemplate, or a SandboxTemplate and its warm pool.
pub fn emit_kind(
    run: &RunConfig,
    options: &EmitOptions,
    kind: KubeKind,
    replicas: u32,
) -> Result<String, NotRoundTrip> {
    let plan = Plan::new(run, options.agent_request(), Deployment::Pod);
    if kind == KubeKind::Pod {
        return emit_pod(&plan, options);
    }
    let template = map([
        ("apiVersion", s(SANDBOX_API)),
        ("kind", s("SandboxTemplate")),
        ("metadata", map([("name", s(TEMPLATE_NAME))])),
        (
            "spec",
            map([
                (
                    "podTemplate",
                    map([
                        ("metadata", map([("labels", map([("app.kubernetes.io/name", s(POD_LABEL))]))])),
                        ("spec", pod_spec(&plan, TokenSource::MadeInPod)),
                    ]),
                ),
                ("networkPolicyManagement", s("Managed")),
                ("envVarsInjectionPolicy", s("Disallowed")),
            ]),
        ),
    ]);
    let mut text = format!(
        "{}\n{}",
        sandbox_header(&plan, options, kind),
        yaml::render(&template, &|path| sandbox_comment(path, plan.agent.token.is_some()))?
    );
    if kind == KubeKind::WarmPool {
        let pool = map([
            ("apiVersion", s(SANDBOX_API)),
            ("kind", s("SandboxWarmPool")),
            ("metadata", map([("name", s(format!("{TEMPLATE_NAME}-pool")))])),
            (
                "spec",
                map([
                    ("replicas", u64::from(replicas).into()),
                    ("sandboxTemplateRef", map([("name", s(TEMPLATE_NAME))])),
                ]),
            ),
        ]);
        text.push_str(
            "---
",
        );
        text.push_str(&emit::comment_block(
            "Sandboxes started ahead of their claims, each from the template above (its own token, its own\n\
             workspace): a SandboxClaim naming the template takes one at once.",
        ));
        text.push_str(&yaml::render(&pool, &|_| None)?);
    }
    Ok(text)
}

fn emit_pod(plan: &Plan, options: &EmitOptions) -> Result<String, NotRoundTrip> {
    let pod = map([
        ("apiVersion", s("v1")),
        ("kind", s("Pod")),
        ("metadata", map([("name", s("agent")), ("labels", map([("app.kubernetes.io/name", s(POD_LABEL))]))])),
        ("spec", pod_spec(plan, TokenSource::Secret)),
    ]);
    let mut text = format!("{}\n{}", header(plan, options), yaml::render(&pod, &comment)?);
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

/// The Pod's spec: its security context, the builders as native sidecars (after the token's maker, when the pod
/// makes its own), the agent, and the volumes.
fn pod_spec(plan: &Plan, token_source: TokenSource) -> Value {
    let group: u64 = BUILDER_GROUP.parse().expect("a numeric gid");
    let mut init: Vec<Value> = Vec::new();
    if let (Some(path), TokenSource::MadeInPod) = (plan.agent.token, token_source) {
        init.push(token_maker(plan, path));
    }
    init.extend(plan.builders.iter().map(container));

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
        volumes.push(match token_source {
            TokenSource::Secret => map([
                ("name", s(TOKEN_VOLUME)),
                ("secret", map([("secretName", s("sidecar-token")), ("defaultMode", 0o440u64.into())])),
            ]),
            TokenSource::MadeInPod => {
                map([("name", s(TOKEN_VOLUME)), ("emptyDir", map([("medium", s("Memory")), ("sizeLimit", s("1Mi"))]))])
            }
        });
    }
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
    ])
}

/// The init container that makes a sandbox's token before any builder starts: 32 random bytes, base64, written
/// readable by the pod's uid and group only, with the first builder's image (ours: it has `sh`, `head` and
/// `base64`), else the agent's.
fn token_maker(plan: &Plan, path: &str) -> Value {
    let folder = path.rsplit_once('/').map_or(path, |(folder, _)| folder);
    let image = plan.builders.first().map_or(&plan.agent.image, |builder| &builder.image);
    let script = format!("umask 0227 && head -c 32 /dev/urandom | base64 > {}", protocol::shell::word(path));
    map([
        ("name", s("sidecar-token")),
        ("image", s(image.clone())),
        ("imagePullPolicy", s("IfNotPresent")),
        ("command", list([s("sh"), s("-c"), s(escape(&script))])),
        (
            "resources",
            map([
                ("requests", map([("cpu", s("10m")), ("memory", s("16Mi"))])),
                ("limits", map([("memory", s("32Mi"))])),
            ]),
        ),
        (
            "securityContext",
            map([
                ("allowPrivilegeEscalation", false.into()),
                ("readOnlyRootFilesystem", true.into()),
                ("capabilities", map([("drop", list([s("ALL")]))])),
            ]),
        ),
        ("volumeMounts", list([map([("name", s(TOKEN_VOLUME)), ("mountPath", s(folder))])])),
    ])
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

/// The template's comments: the Pod's own ([`comment`]) under `spec.podTemplate`, with the init containers
/// counted from the builders when the token's maker comes first.
fn sandbox_comment(path: &[&str], token_maker: bool) -> Option<String> {
    if let ["spec", "podTemplate", "spec", inner @ ..] = path {
        return match inner {
            ["initContainers"] if token_maker => Some(
                "First the token's maker (a plain init container, run to its end), then the builders as native\n\
                 sidecars (restartPolicy: Always): started, and healthy, before the agent; stopped after it."
                    .to_owned(),
            ),
            ["initContainers", "0", ..] if token_maker => None,
            ["initContainers", index, rest @ ..] if token_maker => {
                let builder = index.parse::<usize>().ok()?.checked_sub(1)?.to_string();
                comment(&[&["spec", "initContainers", builder.as_str()], rest].concat())
            }
            _ => comment(&[&["spec"], inner].concat()),
        };
    }
    let text = match path {
        ["spec", "podTemplate"] => {
            "The run's Pod, as `sidecarctl kube --kind pod` prints it, with a token made in each sandbox."
        }
        ["spec", "networkPolicyManagement"] => {
            "The template's own policy, not ours: the controller's secure default admits only the sandbox router and\n\
             lets the pod reach the public internet (the builders' registries), not the cluster's private addresses.\n\
             The builders answer on 127.0.0.1 inside the pod; the kubelet's probes are not subject to the policy."
        }
        ["spec", "envVarsInjectionPolicy"] => {
            "A claim may not change the builders' or the agent's variables (BUILD_SIDECARS, the token's path)."
        }
        _ => return None,
    };
    Some(text.to_owned())
}

fn sandbox_header(plan: &Plan, options: &EmitOptions, kind: KubeKind) -> String {
    let what = match kind {
        KubeKind::WarmPool => "an agent-sandbox SandboxTemplate and a SandboxWarmPool of it",
        _ => "an agent-sandbox SandboxTemplate",
    };
    let mut text = format!(
        "Generated by `{}`:\n\
         the run `sidecarctl up` starts with the same options, as {what}\n\
         (kubernetes-sigs/agent-sandbox, {SANDBOX_API}: its controller and CRDs installed on the cluster,\n\
         Kubernetes 1.29 or later). Each sandbox is one Pod whose builders are native sidecars, reached by the agent\n\
         on 127.0.0.1. To change it, change the options and regenerate.\n\n",
        options.generator()
    );
    if plan.agent.token.is_some() {
        text.push_str(
            "Each sandbox makes its own token when it starts (the init container sidecar-token, into a memory\n\
             volume): no Secret to create, and no two sandboxes of a pool share one.\n\n",
        );
    }
    text.push_str("  kubectl apply -f <this file>\n");
    text.push_str(&format!(
        "  a SandboxClaim with spec.sandboxTemplateRef.name: {TEMPLATE_NAME} then gets a sandbox of it\n\n"
    ));
    text.push_str(
        "The cluster must be able to pull the images: push the ones built from images/Dockerfile (docs/images.md)\n\
         and name them with --builder-image RT=IMAGE and AGENT_IMAGE.\n",
    );
    emit::comment_block(&text)
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
