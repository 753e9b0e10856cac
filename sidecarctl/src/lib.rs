//! sidecarctl: one command that starts an agent container with its build sidecars on Docker or Podman (the Docker
//! Engine API), tears everything down afterwards, and emits the same run as a compose file or a Kubernetes Pod.
//!
//! Two layers. `model` is the validated configuration of a run (profile and flags), and `plan` the one container
//! plan made from it; `render` expresses the plan as Engine API bodies (`render::api`), a compose file and a Pod.
//! Beside them, `engine` talks to the container engine, and `up`, `ps`, `logs` and `down` are the commands.

pub mod agent;
pub mod discovery;
pub mod down;
pub mod engine;
pub mod gate;
pub mod image;
pub mod logs;
pub mod model;
pub mod names;
pub mod options;
pub mod plan;
pub mod profile;
pub mod progress;
pub mod ps;
pub mod render;
pub mod runtime;
pub mod signals;
pub mod token;
pub mod up;
