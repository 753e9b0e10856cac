//! The builders' cache volumes against real engines, each test on Docker and on Podman: pip's cache works for root
//! and for the image's uid in one shared volume, the second install coming from it, with no warning; and `up` and
//! the compose file it emits (run by docker-compose) use the same volume.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use protocol::random_hex;

use crate::engines::{on_both_engines, TestEngine};

on_both_engines!(pips_cache_works_for_root_and_for_the_images_uid, up_and_its_compose_file_share_the_cache_volume);

/// An sdist whose build backend is its own (`backend-path`, no build requirements): pip builds it with no index,
/// and keeps the wheel it built in its cache, so a second install of it either builds again or comes from there.
const PYPROJECT: &str = "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n";
const BACKEND: &str = r#"import base64, hashlib, os, zipfile
NAME, VERSION = "sidecar_cache_probe", "1.0"
DIST = f"{NAME}-{VERSION}"

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{DIST}-py3-none-any.whl"
    files = {
        f"{NAME}.py": "VALUE = 1\n",
        f"{DIST}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
        f"{DIST}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{DIST}.dist-info/RECORD,,")
        wheel.writestr(f"{DIST}.dist-info/RECORD", "\n".join(record) + "\n")
    return name
"#;

/// `dist/sidecar_cache_probe-1.0.tar.gz` in `workspace`, readable by every uid.
fn write_sdist(workspace: &Path) {
    let source = workspace.join("src/sidecar_cache_probe-1.0");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("pyproject.toml"), PYPROJECT).unwrap();
    std::fs::write(source.join("backend.py"), BACKEND).unwrap();
    std::fs::create_dir(workspace.join("dist")).unwrap();
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(workspace.join("dist/sidecar_cache_probe-1.0.tar.gz"))
        .arg("-C")
        .arg(workspace.join("src"))
        .arg("sidecar_cache_probe-1.0")
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", String::from_utf8_lossy(&tar.stderr));
}

/// The agent's script: pip's cache folder, then the same install twice (into two fresh folders), each after a
/// marker line, everything on stdout.
const INSTALL_TWICE: &str = "pip cache dir 2>&1; for n in 1 2; do echo \"== install $n\"; \
     pip install --no-index --find-links /workspace/dist --no-deps --target /tmp/probe-$n sidecar_cache_probe 2>&1 \
     || echo \"pip failed: $?\"; done";

/// pip's cache in the builders: as root, pip refuses a cache folder that root does not own, and
/// the images' `/cache/pip` belongs to their builder uid, so pip warned "The directory '/cache/pip' … is not owned
/// … The cache has been disabled" on every call, and built everything again. Now root's pip gets a folder of its own
/// in the volume (the builders' entrypoint), and the same volume serves the image's uid too: for each, the second
/// install of a local sdist comes from the wheel the first one built and cached, with no warning at all.
///
/// `up` runs the builders as the caller, who is root here (as the engines need); `run_as_caller_uid: false` is the
/// image's uid, which the images build for a caller's (images/test.sh builds the python builder for uid 2345).
fn pips_cache_works_for_root_and_for_the_images_uid(engine: &TestEngine) {
    assert_eq!(nix::unistd::getuid().as_raw(), 0, "the engines run as root, and so does this test's caller");
    let workspace = tempfile::tempdir().unwrap();
    std::fs::set_permissions(workspace.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    write_sdist(workspace.path());
    let volume = format!("it-pip-{}", random_hex(4).unwrap());
    let image = "sidecar-builder-python:latest";
    let image_user = engine.image(image).and_then(|i| i.config).and_then(|c| c.user).unwrap_or_default();
    let image_uid = image_user.split(':').next().unwrap_or_default();
    assert!(!image_uid.is_empty() && image_uid != "0", "the builder image runs as '{image_user}', not a user");

    for (who, as_caller, cache) in [("root", true, "/cache/pip/root"), ("the image's uid", false, "/cache/pip")] {
        let profile = workspace.path().join("profile.yaml");
        std::fs::write(
            &profile,
            format!(
                "tool_backends:\n  sidecars:\n    - {{runtime: python, image: {image}, run_as_caller_uid: {as_caller}, \
                 cache_volumes: [\"{volume}:/cache/pip\"]}}\n"
            ),
        )
        .unwrap();
        let run = format!("it-pip-{}", random_hex(4).unwrap());
        let (profile, folder) = (profile.display().to_string(), workspace.path().display().to_string());
        let args = engine
            .up_args(&run, &["-p", &profile, "--workspace", &folder, "--", "sidecar-agent", "sh", "-c", INSTALL_TWICE]);
        let output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "{who}: stdout:\n{stdout}\nstderr:\n{stderr}");
        let (dir, installs) = stdout.split_once("== install 1\n").unwrap_or_else(|| panic!("{who}:\n{stdout}"));
        let (first, second) = installs.split_once("== install 2\n").unwrap_or_else(|| panic!("{who}:\n{stdout}"));
        assert_eq!(dir.trim(), cache, "{who}: pip's cache folder\n{stdout}");
        assert!(!stdout.contains("WARNING") && !stdout.contains("pip failed"), "{who}:\n{stdout}");
        assert!(first.contains("Building wheel for sidecar_cache_probe"), "{who}, the first install:\n{first}");
        assert!(first.contains(&format!("Stored in directory: {cache}/wheels/")), "{who}, the first install:\n{first}");
        assert!(first.contains("Successfully installed sidecar_cache_probe-1.0"), "{who}:\n{first}");
        // The second comes from the cache: no build, the cached wheel named.
        assert!(!second.contains("Building wheel"), "{who}: the second install built again:\n{second}");
        let cached = "Using cached sidecar_cache_probe-1.0-py3-none-any.whl";
        assert!(second.contains(cached), "{who}, the second install:\n{second}");
        assert!(second.contains("Successfully installed sidecar_cache_probe-1.0"), "{who}:\n{second}");
        engine.assert_nothing_left(&run);
    }
    assert!(engine.volume_exists(&volume), "the cache volume is kept");
    engine.remove_volume(&volume);
}

/// A cache volume is named as the profile names it, by `up` and in the compose file (whose
/// `name:` keeps docker-compose from naming it `<project>_<name>`), so the two share it. `up`'s builder writes a file
/// into the cache (the agent's `python3`, forwarded); the compose file's builder, started by docker-compose under a
/// project name of its own, reads it back; and no `<project>_<name>` volume exists afterwards.
fn up_and_its_compose_file_share_the_cache_volume(engine: &TestEngine) {
    let workspace = tempfile::tempdir().unwrap();
    let volume = format!("it-shared-{}", random_hex(4).unwrap());
    let profile = workspace.path().join("profile.yaml");
    std::fs::write(
        &profile,
        format!(
            "tool_backends:\n  sidecars:\n    - {{runtime: python, image: sidecar-builder-python:latest, \
             cache_volumes: [\"{volume}:/cache/pip\"]}}\n"
        ),
    )
    .unwrap();
    let (profile, folder) = (profile.display().to_string(), workspace.path().display().to_string());
    let marker = random_hex(8).unwrap();
    let script = format!("python3 -c \"open('/cache/pip/from-up', 'w').write('{marker}')\"");
    let run = format!("it-shared-{}", random_hex(4).unwrap());
    let args =
        engine.up_args(&run, &["-p", &profile, "--workspace", &folder, "--", "sidecar-agent", "sh", "-c", &script]);
    let output = engine.sidecarctl(&args).stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    engine.assert_nothing_left(&run);

    // The same run as a compose file, with the limits `up` was given (Podman needs them here), run as its header
    // says: the builders as the caller (.env), the token in ./sidecar-token.
    let mut emit = vec!["compose", "-p", &profile, "--workspace", &folder];
    emit.extend(engine.limit_args());
    emit.extend(["--", "sidecar-agent:latest", "sleep", "infinity"]);
    let emitted = engine.sidecarctl(&emit).output().unwrap();
    assert!(emitted.status.success(), "{}", String::from_utf8_lossy(&emitted.stderr));
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("compose.yaml"), &emitted.stdout).unwrap();
    std::fs::write(project.path().join(".env"), "SIDECAR_UID=0\nSIDECAR_GID=0\n").unwrap();
    std::fs::write(project.path().join("sidecar-token"), random_hex(32).unwrap()).unwrap();
    let name = format!("it-compose-{}", random_hex(4).unwrap());
    let compose = |args: &[&str]| {
        Command::new("docker-compose")
            .args(["-p", &name, "-f", "compose.yaml"])
            .args(args)
            .current_dir(project.path())
            .env("DOCKER_HOST", engine.host())
            .stdin(Stdio::null())
            .output()
            .expect("docker-compose runs (apt-get install -y docker-compose)")
    };
    let read = compose(&["run", "--rm", "--no-deps", "-T", "builder-python", "cat", "/cache/pip/from-up"]);
    let down = compose(&["down"]);
    // Whatever the verdict, the volumes go first (the project's own, if compose made one).
    let project_volume = format!("{name}_{volume}");
    let made_its_own = engine.volume_exists(&project_volume);
    engine.remove_volume(&project_volume);
    engine.remove_volume(&volume);
    let (stdout, stderr) = (String::from_utf8_lossy(&read.stdout), String::from_utf8_lossy(&read.stderr));
    assert_eq!(read.status.code(), Some(0), "docker-compose run: stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(stdout, marker, "compose's builder does not see what up's wrote in {volume}:\n{stderr}");
    assert!(down.status.success(), "docker-compose down: {}", String::from_utf8_lossy(&down.stderr));
    assert!(!made_its_own, "docker-compose made a volume of its own project, {project_volume}");
}
