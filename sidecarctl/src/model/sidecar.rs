//! One builder of a run, every default applied: from `--sidecar RT` or from a profile entry, checked.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::{positive_seconds, ModelError, Volume, VolumeSource};
use crate::profile::{scalar_string, SidecarSpec};
use crate::runtime::Runtime;

pub const DEFAULT_PORT: u16 = 8080;
pub const DEFAULT_WORKSPACE_TARGET: &str = "/workspace";
pub const DEFAULT_READY_TIMEOUT_SECS: f64 = 60.0;

/// One builder.
#[derive(Debug, Clone, PartialEq)]
pub struct Sidecar {
    pub runtime: Runtime,
    pub image: String,
    pub port: u16,
    /// The profile's `command`, as written; `None`: `exec-server -port P -cwd W` on the port the plan gives it.
    pub command: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    pub env_passthrough: Vec<String>,
    /// Named volumes or host folders, never removed.
    pub cache_volumes: Vec<Volume>,
    /// The profile's health command override, compose form (`["CMD", …]`, `["CMD-SHELL", …]`; a bare argv in the
    /// profile becomes `["CMD", argv…]`).
    pub healthcheck: Option<Vec<String>>,
    pub workspace_target: String,
    /// Seconds, > 0; kept as written for messages ("within 60s").
    pub ready_timeout: f64,
    pub run_as_caller_uid: bool,
}

impl Sidecar {
    /// A sidecar with every default: what `--sidecar RT` asks for.
    pub fn defaults(runtime: Runtime, ready_timeout: f64) -> Sidecar {
        Sidecar {
            runtime,
            image: runtime.default_image(),
            port: DEFAULT_PORT,
            command: None,
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
            cache_volumes: Vec::new(),
            healthcheck: None,
            workspace_target: DEFAULT_WORKSPACE_TARGET.to_owned(),
            ready_timeout,
            run_as_caller_uid: true,
        }
    }

    pub fn ready_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.ready_timeout)
    }

    /// A profile entry, checked; `index` names it in messages, `cwd` and `workspace` place relative cache paths.
    pub fn from_spec(
        index: usize,
        spec: &SidecarSpec,
        default_timeout: f64,
        cwd: &Path,
        workspace: &Path,
    ) -> Result<Sidecar, ModelError> {
        let runtime = spec
            .runtime
            .parse::<Runtime>()
            .map_err(|_| ModelError::InvalidRuntime { index, value: spec.runtime.clone() })?;
        if spec.image.trim().is_empty() {
            return Err(ModelError::EmptyImage { index });
        }
        let port = match spec.port {
            None => DEFAULT_PORT,
            Some(p) => u16::try_from(p).ok().filter(|p| *p >= 1).ok_or(ModelError::PortRange { index })?,
        };
        let ready_timeout = match &spec.ready_timeout {
            None => default_timeout,
            Some(v) => positive_seconds(v).ok_or(ModelError::ReadyTimeout { index: Some(index) })?,
        };
        let workspace_target = spec.workspace_target.clone().unwrap_or_else(|| DEFAULT_WORKSPACE_TARGET.to_owned());
        let variable = |key: &'static str, name: &String| {
            let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            // `A=B` as a name would set another variable than the one written (`A`, to `B=value`).
            if valid {
                Ok(())
            } else {
                Err(ModelError::BadEnvName { index, key, name: name.clone() })
            }
        };
        for name in &spec.env_passthrough {
            variable("env_passthrough", name)?;
        }
        let mut env = BTreeMap::new();
        for (name, value) in &spec.env {
            variable("env", name)?;
            let value = scalar_string(value).ok_or_else(|| ModelError::InvalidEnv { index, name: name.clone() })?;
            env.insert(name.clone(), value);
        }
        let cache_volumes = spec
            .cache_volumes
            .iter()
            .map(|text| {
                cache_volume(text, cwd, workspace)
                    .ok_or_else(|| ModelError::BadCacheVolume { index, value: text.clone() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let healthcheck = match &spec.healthcheck {
            None => None,
            Some(h) => {
                let command_named = match h.test.first().map(String::as_str) {
                    Some("CMD" | "CMD-SHELL") => h.test.len() > 1,
                    Some("NONE") | None => false,
                    Some(_) => true,
                };
                if !command_named {
                    return Err(ModelError::BadHealthcheck { index });
                }
                // A bare argv is kept in the `CMD` form: the one the engines' health check and compose take.
                match h.test[0].as_str() {
                    "CMD" | "CMD-SHELL" => Some(h.test.clone()),
                    _ => Some(std::iter::once("CMD".to_owned()).chain(h.test.iter().cloned()).collect()),
                }
            }
        };
        Ok(Sidecar {
            runtime,
            image: spec.image.trim().to_owned(),
            port,
            command: spec.command.clone(),
            env,
            env_passthrough: spec.env_passthrough.clone(),
            cache_volumes,
            healthcheck,
            workspace_target,
            ready_timeout,
            run_as_caller_uid: spec.run_as_caller_uid.unwrap_or(true),
        })
    }
}

/// `SOURCE:/PATH[:ro|:rw]`, SOURCE a volume name or a path.
fn cache_volume(text: &str, cwd: &Path, workspace: &Path) -> Option<Volume> {
    let (source, rest) = text.split_once(':')?;
    let (target, read_only) = match rest.rsplit_once(':') {
        Some((target, "ro")) => (target, true),
        Some((target, "rw")) => (target, false),
        Some(_) => return None,
        None => (rest, false),
    };
    if source.is_empty() || !target.starts_with('/') {
        return None;
    }
    let source = VolumeSource::parse(source, cwd, workspace);
    if let VolumeSource::Named(name) = &source {
        if !super::volume_name_ok(name) {
            return None;
        }
    }
    Some(Volume { source, target: target.to_owned(), read_only })
}

/// `--sidecar RT…`: defaults for each, no runtime twice.
pub fn from_flags(names: &[String], ready_timeout: f64) -> Result<Vec<Sidecar>, ModelError> {
    let mut sidecars: Vec<Sidecar> = Vec::new();
    for name in names {
        let runtime =
            name.parse::<Runtime>().map_err(|_| ModelError::FlagRuntime { flag: "--sidecar", value: name.clone() })?;
        if sidecars.iter().any(|s| s.runtime == runtime) {
            return Err(ModelError::FlagDuplicate { value: name.clone() });
        }
        sidecars.push(Sidecar::defaults(runtime, ready_timeout));
    }
    Ok(sidecars)
}

/// No runtime twice in the profile's list.
pub fn check_unique(sidecars: &[Sidecar]) -> Result<(), ModelError> {
    for (index, sidecar) in sidecars.iter().enumerate() {
        if sidecars[..index].iter().any(|earlier| earlier.runtime == sidecar.runtime) {
            return Err(ModelError::DuplicateRuntime { index, value: sidecar.runtime.to_string() });
        }
    }
    Ok(())
}

/// `--builder-image RT=IMAGE…`: each names a sidecar the run has.
pub fn retarget(sidecars: &mut [Sidecar], values: &[String]) -> Result<(), ModelError> {
    for value in values {
        let malformed = || ModelError::BuilderImageMalformed { value: value.clone() };
        let (name, image) = value.split_once('=').ok_or_else(malformed)?;
        if name.is_empty() || image.trim().is_empty() {
            return Err(malformed());
        }
        let runtime = name
            .parse::<Runtime>()
            .map_err(|_| ModelError::FlagRuntime { flag: "--builder-image", value: name.to_owned() })?;
        let sidecar =
            sidecars.iter_mut().find(|s| s.runtime == runtime).ok_or(ModelError::BuilderImageNoSidecar { runtime })?;
        sidecar.image = image.trim().to_owned();
    }
    Ok(())
}
