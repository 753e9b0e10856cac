//! sidecarctl: one command that starts an agent container with its build sidecars on Docker or Podman (the Docker
//! Engine API), tears everything down afterwards, and emits the same run as a compose file or a Kubernetes Pod.
//!
//! Two layers, the arrows pointing down:
//!
//! - What a run is: [`profile`] (the file as written) and [`options`] (the flags) become [`model`]'s validated
//!   configuration, and [`plan`] the one container plan made from it; [`render`] expresses the plan as Engine API
//!   bodies (`render::api`), a compose file (`compose`) and a Pod (`kube`). [`runtime`] (the five runtimes) and
//!   [`names`] (every object's name and label) are below them all.
//! - The commands that act on an engine: [`up`] (network, builders, [`gate`], [`agent`] attached, teardown), [`ps`],
//!   [`logs`], [`down`] (teardown by label) and [`image`] (`image build`); they talk to the engine through
//!   [`engine`] (found by [`discovery`]), show [`progress`], hand out the run's [`token`], and end by [`signals`]
//!   (what Ctrl-C means), retry where the engine may not raise resource limits ([`limits`]), and end with
//!   [`exit`]'s code for each cause.

pub mod agent;
pub mod discovery;
pub mod down;
pub mod engine;
pub mod exit;
pub mod gate;
pub mod image;
pub mod limits;
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
