//! The wrapper installer, an option of both programs (`sidecar-exec --install-wrappers [DIR]`, `ssh-exec
//! --install-wrappers [DIR]`, so an agent image with only one of them can install its wrappers): one tiny `#!/bin/sh`
//! wrapper per command that runs elsewhere, for commands the agent image does not have itself, one backend per
//! command: native > sidecar > SSH. [`backends`] reads what the configuration asks for and which client each
//! wrapper execs, [`install`] writes the folder, [`program`] is the option.

pub mod backends;
pub mod install;
pub mod program;

pub const DEFAULT_DIR: &str = "/opt/sidecar/wrappers";
/// The wrappers of ssh-exec's own entry points, installed whenever the SSH host is configured.
pub const SSH_TOOLS: [&str; 2] = ["host-run", "auto-run"];
