//! The flags that describe a run, shared by `up`, `compose` and `kube` (so an emitted file is the same run).

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Debug, Default, Clone)]
pub struct RunOptions {
    /// Profile file (YAML: `volumes:`, `tool_backends: sidecars: [...]`, `ulimits:`).
    #[arg(long, short = 'p', value_name = "FILE")]
    pub profile: Option<PathBuf>,

    /// A builder for runtime RT (node, python, java, go, rust); repeatable. Replaces the profile's list; the
    /// image defaults to sidecar-builder-RT:latest.
    #[arg(long = "sidecar", value_name = "RT")]
    pub sidecars: Vec<String>,

    /// Run IMAGE for runtime RT, whether the sidecar comes from --sidecar or from the profile; repeatable.
    #[arg(long = "builder-image", value_name = "RT=IMAGE")]
    pub builder_images: Vec<String>,

    /// No builders for this run (wins over --sidecar and the profile).
    #[arg(long)]
    pub disable_sidecars: bool,

    /// The host folder bound at each builder's workspace_target and in the agent (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Do not create a bearer token: /exec is then open to anything on the run's network.
    #[arg(long)]
    pub no_token: bool,

    /// A resource limit for every container, e.g. nofile=4096:4096; repeatable, added to the profile's
    /// `ulimits:`. Docker needs none; Podman where raising limits is not permitted needs nofile and nproc.
    #[arg(long = "ulimit", value_name = "NAME=SOFT[:HARD]")]
    pub ulimits: Vec<String>,
}
