//! Where the container engine is: `--engine`, else `DOCKER_HOST`, else the places Docker's and Podman's own tools
//! look, in their order — the current `docker context`'s endpoint, Docker's socket, rootless Docker's, rootful and
//! rootless Podman's. The first that answers is used; when none does, the error lists each place with what it said.

use std::path::{Path, PathBuf};

/// One place an engine may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnginePlace {
    pub url: String,
    /// Why it is tried (`DOCKER_HOST`, `docker context ci`, `rootless Docker`, …).
    pub from: String,
}

/// The places to try, in order. An explicit choice (`--engine`, `DOCKER_HOST`) is the only place: a typo there
/// must not quietly fall back to another engine. `env` reads a variable (the process's, or a test's).
pub fn places(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Vec<EnginePlace> {
    let place = |url: String, from: &str| EnginePlace { url, from: from.to_owned() };
    if let Some(url) = flag {
        return vec![place(url.to_owned(), "--engine")];
    }
    if let Some(url) = env("DOCKER_HOST").filter(|h| !h.is_empty()) {
        return vec![place(url, "DOCKER_HOST")];
    }
    let mut places = Vec::new();
    if let Some((name, url)) = docker_context(env) {
        places.push(place(url, &format!("docker context {name}")));
    }
    places.push(place("unix:///var/run/docker.sock".into(), "Docker"));
    let runtime_dir = env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty());
    if let Some(dir) = &runtime_dir {
        places.push(place(format!("unix://{dir}/docker.sock"), "rootless Docker"));
    }
    places.push(place("unix:///run/podman/podman.sock".into(), "Podman"));
    if let Some(dir) = &runtime_dir {
        places.push(place(format!("unix://{dir}/podman/podman.sock"), "rootless Podman"));
    }
    places
}

/// The current context's Docker endpoint, as the docker CLI finds it: `DOCKER_CONTEXT`, else `currentContext` in
/// `$DOCKER_CONFIG/config.json` (default `~/.docker`); the context's `meta.json` under `contexts/meta/` holds it.
/// `default` is the CLI's name for "no context" (its socket is tried anyway).
fn docker_context(env: &dyn Fn(&str) -> Option<String>) -> Option<(String, String)> {
    let config =
        env("DOCKER_CONFIG").map(PathBuf::from).or_else(|| env("HOME").map(|home| Path::new(&home).join(".docker")))?;
    let name = env("DOCKER_CONTEXT").filter(|c| !c.is_empty()).or_else(|| {
        let text = std::fs::read_to_string(config.join("config.json")).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value.get("currentContext")?.as_str().map(str::to_owned)
    })?;
    if name == "default" {
        return None;
    }
    // The folder is the hash of the name; reading each `meta.json` finds it without hashing.
    let entries = std::fs::read_dir(config.join("contexts/meta")).ok()?;
    entries.flatten().find_map(|entry| {
        let text = std::fs::read_to_string(entry.path().join("meta.json")).ok()?;
        let meta: serde_json::Value = serde_json::from_str(&text).ok()?;
        (meta.get("Name")?.as_str()? == name)
            .then(|| meta.pointer("/Endpoints/docker/Host")?.as_str().map(|host| (name.clone(), host.to_owned())))?
    })
}

/// Whether a place cannot be tried at all: a UNIX socket that is not there (skipped, and said so).
pub fn absent(place: &EnginePlace) -> bool {
    place.url.strip_prefix("unix://").is_some_and(|path| !Path::new(path).exists())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn explicit_choices_stand_alone_then_the_tools_own_order() {
        assert_eq!(places(Some("tcp://h:2375"), &with(&[("DOCKER_HOST", "unix:///x")]))[0].from, "--engine");
        let only = places(None, &with(&[("DOCKER_HOST", "unix:///x")]));
        assert_eq!(only, [EnginePlace { url: "unix:///x".into(), from: "DOCKER_HOST".into() }]);

        let config = tempfile::tempdir().unwrap();
        let meta = config.path().join("contexts/meta/0123abcd");
        std::fs::create_dir_all(&meta).unwrap();
        std::fs::write(
            meta.join("meta.json"),
            r#"{"Name":"ci","Metadata":{},"Endpoints":{"docker":{"Host":"unix:///srv/ci/docker.sock"}}}"#,
        )
        .unwrap();
        std::fs::write(config.path().join("config.json"), r#"{"currentContext":"ci"}"#).unwrap();
        let dir = config.path().display().to_string();
        let order: Vec<(String, String)> =
            places(None, &with(&[("DOCKER_CONFIG", &dir), ("XDG_RUNTIME_DIR", "/run/user/1000")]))
                .into_iter()
                .map(|p| (p.from, p.url))
                .collect();
        let expected = [
            ("docker context ci", "unix:///srv/ci/docker.sock"),
            ("Docker", "unix:///var/run/docker.sock"),
            ("rootless Docker", "unix:///run/user/1000/docker.sock"),
            ("Podman", "unix:///run/podman/podman.sock"),
            ("rootless Podman", "unix:///run/user/1000/podman/podman.sock"),
        ];
        assert_eq!(order, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
        // DOCKER_CONTEXT wins over the file; `default` is no context.
        let ctx =
            |name: &str| places(None, &with(&[("DOCKER_CONFIG", &dir), ("DOCKER_CONTEXT", name)]))[0].from.clone();
        assert_eq!(ctx("default"), "Docker");
        assert_eq!(ctx("ci"), "docker context ci");
    }
}
