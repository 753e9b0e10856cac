//! A build that failed because a base image could not be pulled: which image, why, and which of the Dockerfile's
//! `*_IMAGE` arguments names it, read from what the build tool wrote to stderr. BuildKit and podman each report it
//! their own way, and in words a person new to the images cannot act on (`failed to create LLB definition: failed
//! to do request: Head "https://registry-1.docker.io/v2/library/rust/manifests/1-bookworm": … no such host`, with
//! the image a python builder needs first being rust); the one line `image build` prints instead names the image,
//! the argument and the two ways out (a local base with `image base` and `--base`, or a mirror).

/// One image the build could not pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedPull {
    /// As the tool named it (`docker.io/library/rust:1-bookworm`, `rust:1-bookworm`).
    pub image: String,
    /// The last part of the tool's reason: `no such host`, `connection refused`, `manifest unknown`.
    pub cause: String,
}

/// Every image `stderr` (a build tool's error output) says could not be pulled, each once, in order.
///
/// Read: BuildKit's plain progress (`#4 [internal] load metadata for REF` and then `#4 ERROR: …`), BuildKit's
/// summary (`failed to resolve source metadata for REF: …`, buildx), podman's (`initializing source docker://REF:
/// …`, and `short-name "REF" did not resolve to an alias …` where no search registry is configured), and, failing
/// those, the registry URL of the request that failed (`Head "https://HOST/v2/NAME/manifests/TAG": …`, which is all
/// Docker 20.10's last line says).
pub fn failed_pulls(stderr: &str) -> Vec<FailedPull> {
    let mut found: Vec<FailedPull> = Vec::new();
    let mut add = |image: &str, cause: &str| {
        let image = image.trim().trim_end_matches(':').to_owned();
        if !image.is_empty() && !found.iter().any(|f| normalize(&f.image) == normalize(&image)) {
            found.push(FailedPull { image, cause: last_part(cause) });
        }
    };
    let mut metadata: Vec<(&str, &str)> = Vec::new();
    for line in stderr.lines().map(str::trim) {
        // podman's retries ("level=warning msg=\"Failed, retrying …\"") repeat the final error, escaped.
        if line.contains("level=warning") {
            continue;
        }
        if let Some((step, image)) = line.split_once(" [internal] load metadata for ") {
            metadata.push((step, image));
            continue;
        }
        if let Some((step, message)) = line.split_once(" ERROR: ") {
            if let Some((_, image)) = metadata.iter().find(|(s, _)| *s == step) {
                add(image, message);
                continue;
            }
        }
        if let Some((_, rest)) = line.split_once("failed to resolve source metadata for ") {
            if let Some((image, cause)) = rest.split_once(": ") {
                add(image, cause);
                continue;
            }
        }
        if let Some((_, rest)) = line.split_once("initializing source docker://") {
            if let Some((image, cause)) = rest.split_once(": ") {
                add(image, cause);
                continue;
            }
        }
        if let Some((_, rest)) = line.split_once("short-name \"") {
            if let Some((image, _)) = rest.split_once('"') {
                add(image, "a short name, and no unqualified-search registries are defined in registries.conf");
                continue;
            }
        }
        if let Some((image, cause)) = from_manifest_url(line) {
            add(&image, cause);
        }
    }
    found
}

/// `Head "https://registry-1.docker.io/v2/library/rust/manifests/1-bookworm": dial tcp: … no such host` →
/// (`registry-1.docker.io/library/rust:1-bookworm`, the rest).
fn from_manifest_url(line: &str) -> Option<(String, &str)> {
    let start = line.find("://")? + 3;
    let (url, rest) = line[start..].split_once('"')?;
    let (host, path) = url.split_once("/v2/")?;
    let (name, reference) = path.split_once("/manifests/")?;
    let separator = if reference.contains(':') { '@' } else { ':' };
    Some((format!("{host}/{name}{separator}{reference}"), rest.trim_start_matches(':').trim()))
}

/// The reason's last part: `dial tcp: lookup registry-1.docker.io on 10.0.0.53:53: no such host` → `no such host`.
fn last_part(cause: &str) -> String {
    let cause = cause.trim().trim_end_matches(['"', '\\']);
    cause.rsplit(": ").next().unwrap_or(cause).trim().to_owned()
}

/// An image reference as Docker Hub's own images are written: `docker.io/library/rust:1-bookworm`,
/// `registry-1.docker.io/library/rust:1-bookworm` and `docker://rust:1-bookworm` are all `rust:1-bookworm`.
pub fn normalize(image: &str) -> String {
    let image = image.trim().strip_prefix("docker://").unwrap_or(image.trim());
    let mut rest = image;
    for hub in ["docker.io/", "index.docker.io/", "registry-1.docker.io/"] {
        if let Some(stripped) = rest.strip_prefix(hub) {
            rest = stripped.strip_prefix("library/").unwrap_or(stripped);
            break;
        }
    }
    rest.to_owned()
}

/// The image's path on any registry, for the mirror form: `rust:1-bookworm` as it is, `localhost:5000/team/rust:1`
/// → `team/rust:1` (its first part names a registry: it holds a `.` or a `:`, or is `localhost`).
pub fn path_on_a_registry(image: &str) -> String {
    let image = normalize(image);
    match image.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest.to_owned(),
        _ => image,
    }
}

/// The Dockerfile's stage names (`FROM … AS name`): when a stage fails, podman goes on to read a later `FROM name`
/// as an image to pull, and says that short name did not resolve. No image, so no failed pull.
pub fn stage_names(dockerfile: &str) -> Vec<String> {
    dockerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FROM "))
        .filter_map(|l| l.rsplit_once(" AS "))
        .map(|(_, name)| name.trim().to_owned())
        .collect()
}

/// [`failed_pulls`], less the stage names of `dockerfile`.
pub fn failed_pulls_of(stderr: &str, dockerfile: &str) -> Vec<FailedPull> {
    let stages = stage_names(dockerfile);
    failed_pulls(stderr).into_iter().filter(|p| !stages.contains(&normalize(&p.image))).collect()
}
