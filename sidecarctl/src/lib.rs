//! sidecarctl: one command that starts an agent container with its build sidecars on Docker or Podman (the Docker
//! Engine API), tears everything down afterwards, and emits the same run as a compose file or a Kubernetes Pod.
//!
//! `model` is the one validated description of a run; `engine` talks to the container engine; `up`, `ps`, `logs`,
//! `down` are the commands; `compose` and `kube` the emitters.

pub mod agent;
pub mod compose;
pub mod down;
pub mod emit;
pub mod engine;
pub mod gate;
pub mod kube;
pub mod logs;
pub mod model;
pub mod names;
pub mod options;
pub mod profile;
pub mod progress;
pub mod ps;
pub mod runtime;
pub mod signals;
pub mod spec;
pub mod token;
pub mod up;
pub mod yaml;
