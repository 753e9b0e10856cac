use super::*;
use crate::runtime::Runtime;

fn opts() -> RunOptions {
    RunOptions::default()
}

fn build_yaml(yaml: &str, options: &RunOptions) -> Result<RunConfig, ModelError> {
    let profile = Profile::parse(yaml, "test.yaml").map_err(ModelError::Profile)?;
    RunConfig::build(options, profile, &std::env::temp_dir(), WorkspaceLookup::Resolve)
}

fn workspace() -> VolumeSource {
    VolumeSource::Workspace { under: String::new() }
}

fn message(yaml: &str, options: &RunOptions) -> String {
    build_yaml(yaml, options).expect_err("invalid").to_string()
}

const SEED_PROFILE: &str = r#"
volumes:
  - { source: "${CWD}", target: /workspace }
tool_backends:
  sidecars:
    - runtime: node
      image: heretic-builder-node:latest
      port: 8081
      env: { NPM_CONFIG_FUND: "false", RETRIES: 3, STRICT: true }
      env_passthrough: ["NPM_TOKEN"]
      cache_volumes: ["heretic-npm-cache:/home/builder/.npm"]
      workspace_target: /workspace
      ready_timeout: 30
      run_as_caller_uid: true
    - runtime: python
      image: heretic-builder-python:latest
      env_passthrough: ["PIP_INDEX_URL", "NPM_TOKEN"]
      healthcheck: { test: ["CMD", "exec-server", "-healthcheck"], interval: 5s }
      run_as_caller_uid: false
"#;

#[test]
fn the_seed_profile_parses_with_its_defaults() {
    let run = build_yaml(SEED_PROFILE, &opts()).unwrap();
    let tmp = std::env::temp_dir().canonicalize().unwrap();
    assert_eq!(run.workspace, tmp);
    assert_eq!(run.volumes, vec![Volume { source: workspace(), target: "/workspace".into(), read_only: false }]);
    let [node, python] = &run.sidecars[..] else { panic!("two sidecars: {:?}", run.sidecars) };
    assert_eq!(node.runtime, Runtime::Node);
    assert_eq!(node.port, 8081);
    assert_eq!(node.command, None, "the plan's exec-server command");
    assert_eq!(
        node.cache_volumes,
        [Volume {
            source: VolumeSource::Named("heretic-npm-cache".into()),
            target: "/home/builder/.npm".into(),
            read_only: false
        }]
    );
    assert_eq!(node.env["NPM_CONFIG_FUND"], "false");
    assert_eq!(node.env["RETRIES"], "3");
    assert_eq!(node.env["STRICT"], "true");
    assert_eq!(node.ready_timeout, 30.0);
    assert_eq!(python.port, 8080);
    assert_eq!(python.ready_timeout, DEFAULT_READY_TIMEOUT_SECS);
    assert!(!python.run_as_caller_uid);
    assert_eq!(
        python.healthcheck.as_deref(),
        Some(&["CMD".to_owned(), "exec-server".into(), "-healthcheck".into()][..])
    );
    assert!(run.token);
    assert_eq!(run.env_passthrough(), "NPM_TOKEN,PIP_INDEX_URL");
}

#[test]
fn every_seed_validation_message_word_for_word() {
    let one =
        |body: &str| format!("volumes: [{{source: /tmp, target: /workspace}}]\ntool_backends:\n  sidecars:\n{body}");
    let cases = [
        (
            one("    - {runtime: ruby, image: x}\n"),
            "tool_backends.sidecars[0].runtime 'ruby' is invalid (must be one of: node, python, java, go, rust)",
        ),
        (
            one("    - {image: x}\n"),
            "tool_backends.sidecars[0].runtime '' is invalid (must be one of: node, python, java, go, rust)",
        ),
        (
            one("    - {runtime: node, image: a}\n    - {runtime: go, image: b}\n    - {runtime: node, image: c}\n"),
            "tool_backends.sidecars[2]: duplicate runtime 'node'",
        ),
        (one("    - {runtime: node}\n"), "tool_backends.sidecars[0].image must be non-empty"),
        (one("    - {runtime: node, image: '  '}\n"), "tool_backends.sidecars[0].image must be non-empty"),
        (
            one("    - {runtime: node, image: x, port: 0}\n"),
            "tool_backends.sidecars[0].port must be between 1 and 65535",
        ),
        (
            one("    - {runtime: node, image: x, port: 65536}\n"),
            "tool_backends.sidecars[0].port must be between 1 and 65535",
        ),
        (
            one("    - {runtime: node, image: x, port: -1}\n"),
            "tool_backends.sidecars[0].port must be between 1 and 65535",
        ),
        (
            "tool_backends:\n  ready_timeout: 0\n  sidecars: [{runtime: node, image: x}]\n".to_owned(),
            "tool_backends.ready_timeout must be a positive number of seconds",
        ),
        (
            "tool_backends:\n  ready_timeout: soon\n".to_owned(),
            "tool_backends.ready_timeout must be a positive number of seconds",
        ),
        (
            one("    - {runtime: node, image: x, ready_timeout: -5}\n"),
            "tool_backends.sidecars[0].ready_timeout must be a positive number of seconds",
        ),
        (
            "volumes: [{source: /tmp, target: /src}]\ntool_backends:\n  sidecars: [{runtime: node, image: x}]\n"
                .to_owned(),
            "tool_backends: no volume targets '/workspace' — build sidecars need the workspace bind-mounted",
        ),
        (
            "runner: custom\ntool_backends:\n  sidecars: [{runtime: node, image: x}]\n".to_owned(),
            "Build sidecars require the 'docker' or 'compose' runner, but this profile uses the custom runner.",
        ),
    ];
    for (yaml, expected) in cases {
        assert_eq!(message(&yaml, &opts()), expected, "for:\n{yaml}");
    }
}

#[test]
fn beyond_the_seed_other_mistakes_are_named() {
    let base = "tool_backends:\n  sidecars:\n";
    assert_eq!(
        message(&format!("{base}    - {{runtime: node, image: x, cache_volumes: [npm-cache]}}\n"), &opts()),
        "tool_backends.sidecars[0].cache_volumes: 'npm-cache' is not NAME:/PATH or /HOST:/PATH"
    );
    assert_eq!(
        message(&format!("{base}    - {{runtime: node, image: x, healthcheck: {{test: [CMD]}}}}\n"), &opts()),
        "tool_backends.sidecars[0].healthcheck.test must name a command"
    );
    // A bare argv is the `CMD` form, the one an engine's health check and compose take (`["false"]` alone would be
    // an unknown test type to Docker).
    let bare =
        build_yaml(&format!("{base}    - {{runtime: node, image: x, healthcheck: {{test: ['false']}}}}\n"), &opts());
    assert_eq!(bare.unwrap().sidecars[0].healthcheck.as_deref(), Some(&["CMD".to_owned(), "false".into()][..]));
    assert_eq!(
        message(&format!("{base}    - {{runtime: node, image: x, env: {{A: [1]}}}}\n"), &opts()),
        "tool_backends.sidecars[0].env.A must be a string, number or boolean"
    );
    // A typo in a sidecar key is an error, not a silently ignored key.
    let typo = message(&format!("{base}    - {{runtime: node, image: x, cache_volume: [a:/b]}}\n"), &opts());
    assert!(typo.starts_with("profile test.yaml: ") && typo.contains("unknown field `cache_volume`"), "{typo}");
    // A profile with keys this tool does not use is fine.
    build_yaml("agent: claude\nextra: {network: x}\n", &opts()).unwrap();
}

#[test]
fn sidecar_flags_replace_the_profile_list_with_defaults() {
    let options = RunOptions { sidecars: vec!["python".into(), "node".into()], ..opts() };
    let run = build_yaml(SEED_PROFILE, &options).unwrap();
    assert_eq!(run.sidecars, vec![Sidecar::defaults(Runtime::Python, 60.0), Sidecar::defaults(Runtime::Node, 60.0)]);
    assert_eq!(run.sidecars[0].image, "sidecar-builder-python:latest");
    // The profile's default ready_timeout still applies to flag sidecars.
    let run = build_yaml("tool_backends: {ready_timeout: 5}\n", &options).unwrap();
    assert_eq!(run.sidecars[0].ready_timeout, 5.0);
}

#[test]
fn sidecar_flag_mistakes() {
    let with = |names: &[&str]| RunOptions { sidecars: names.iter().map(|s| s.to_string()).collect(), ..opts() };
    assert_eq!(
        message("", &with(&["ruby"])),
        "--sidecar runtime 'ruby' is invalid (must be one of: node, python, java, go, rust)"
    );
    assert_eq!(message("", &with(&["go", "go"])), "--sidecar: duplicate runtime 'go'");
}

#[test]
fn disable_sidecars_wins_over_sidecar_flags_and_the_profile() {
    let options = RunOptions {
        sidecars: vec!["node".into()],
        builder_images: vec!["node=x".into()],
        disable_sidecars: true,
        ..opts()
    };
    assert!(build_yaml(SEED_PROFILE, &options).unwrap().sidecars.is_empty());
}

#[test]
fn builder_image_retargets_flag_and_profile_sidecars() {
    let options = RunOptions { builder_images: vec!["python=ghcr.io/me/py:2".into()], ..opts() };
    let run = build_yaml(SEED_PROFILE, &options).unwrap();
    assert_eq!(run.sidecars[1].image, "ghcr.io/me/py:2");
    assert_eq!(run.sidecars[0].image, "heretic-builder-node:latest");

    let options = RunOptions {
        sidecars: vec!["node".into()],
        builder_images: vec!["node=registry:5000/node:1".into()],
        ..opts()
    };
    assert_eq!(build_yaml("", &options).unwrap().sidecars[0].image, "registry:5000/node:1");
}

#[test]
fn builder_image_mistakes() {
    let with = |value: &str| RunOptions { sidecars: vec!["node".into()], builder_images: vec![value.into()], ..opts() };
    for bad in ["node", "=img", "node=", "node=  "] {
        assert_eq!(message("", &with(bad)), format!("--builder-image expects <runtime>=<image>, got '{bad}'"));
    }
    assert_eq!(
        message("", &with("ruby=x")),
        "--builder-image runtime 'ruby' is invalid (must be one of: node, python, java, go, rust)"
    );
    assert!(message("", &with("go=x")).starts_with("--builder-image go=…: this run has no go sidecar"));
}

#[test]
fn workspace_flag_is_cwd_and_the_workspace_bind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    let options = RunOptions { workspace: Some(path.clone()), sidecars: vec!["node".into()], ..opts() };
    // No volumes in the profile: the workspace alone, at the sidecars' target.
    let run = build_yaml("", &options).unwrap();
    assert_eq!(run.volumes, vec![Volume { source: workspace(), target: "/workspace".into(), read_only: false }]);
    // ${CWD} is the workspace; an explicit --workspace also replaces a fixed workspace source.
    let yaml =
        "volumes: [{source: /elsewhere, target: /workspace}, {source: '${CWD}/data', target: /data, read_only: true}]";
    let run = build_yaml(yaml, &options).unwrap();
    assert_eq!(run.volumes[0].source, workspace());
    assert_eq!(
        run.volumes[1],
        Volume { source: VolumeSource::Workspace { under: "data".into() }, target: "/data".into(), read_only: true }
    );
    // Other paths are this machine's, relative ones placed in the current folder (here the workspace, so `./y` is
    // under it); other sources name volumes.
    let yaml =
        "volumes: [{source: /elsewhere, target: /a}, {source: ./x/../y, target: /b}, {source: data, target: /c}]";
    let sources: Vec<VolumeSource> = build_yaml(yaml, &opts()).unwrap().volumes.into_iter().map(|v| v.source).collect();
    assert_eq!(
        sources,
        [
            VolumeSource::Host("/elsewhere".into()),
            VolumeSource::Workspace { under: "y".into() },
            VolumeSource::Named("data".into())
        ]
    );
    assert_eq!(
        message("volumes: [{source: 'my volume', target: /a}]", &opts()),
        "volumes[0].source 'my volume' is neither a path (/…, ./…) nor a volume name (letters, digits, '_', '.', '-', \
         starting with a letter or digit)"
    );

    let missing = RunOptions { workspace: Some(path.join("nope")), ..opts() };
    assert!(message("", &missing).starts_with(&format!("workspace {}", path.join("nope").display())));
}

#[test]
fn ulimits_from_profile_and_flags() {
    let options = RunOptions { ulimits: vec!["nofile=4096:4096".into(), "nproc=2048".into()], ..opts() };
    let run = build_yaml("ulimits: [\"nofile=1024:2048\", \"core=0\"]", &options).unwrap();
    let shown: Vec<_> = run.ulimits.iter().map(|u| format!("{}={}:{}", u.name, u.soft, u.hard)).collect();
    assert_eq!(shown, ["core=0:0", "nofile=4096:4096", "nproc=2048:2048"]);
    for bad in ["nofile", "nofile=a", "nofile=1:x"] {
        let options = RunOptions { ulimits: vec![bad.into()], ..opts() };
        assert_eq!(
            message("", &options),
            format!("ulimit '{bad}' is not NAME=SOFT[:HARD] with numbers (e.g. nofile=4096:4096)")
        );
    }
    // Before, an unknown name and a limit no container can start with were accepted, and failed only
    // when the engine started a container (after the builders); -1 is unlimited, as with `docker run`.
    let cases = [
        ("nofiles=4096", "names no limit the engines know (one of: core, cpu, data, fsize, locks, memlock, "),
        ("=1", "names no limit the engines know"),
        ("nofile=0", "would let no container start: nofile and nproc must be at least 1"),
        ("nproc=0:10", "would let no container start"),
        ("nofile=10:5", "needs whole numbers or -1 (unlimited), the soft limit at most the hard"),
        ("core=-2", "needs whole numbers or -1"),
        ("memlock=-1:5", "needs whole numbers or -1"),
    ];
    for (bad, problem) in cases {
        let got = message("", &RunOptions { ulimits: vec![bad.into()], ..opts() });
        assert!(got.starts_with(&format!("ulimit '{bad}' {problem}")), "{got}");
    }
    let run = build_yaml("ulimits: [\"memlock=-1:-1\", \"stack=8192:-1\"]", &opts()).unwrap();
    assert_eq!((run.ulimits[0].soft, run.ulimits[1].hard), (-1, -1));
}

/// Before, a profile's env names became `NAME=value` entries unchecked (`A=B` set another variable).
#[test]
fn env_and_passthrough_names_are_variable_names() {
    let base = "tool_backends:\n  sidecars:\n    - {runtime: node, image: x, ";
    let cases = [
        ("env: {'A=B': v}}", "tool_backends.sidecars[0].env: 'A=B' is not a variable name"),
        ("env: {'1X': v}}", "tool_backends.sidecars[0].env: '1X' is not a variable name"),
        ("env: {'': v}}", "tool_backends.sidecars[0].env: '' is not a variable name"),
        ("env_passthrough: ['NPM TOKEN']}", "tool_backends.sidecars[0].env_passthrough: 'NPM TOKEN' is not a"),
        ("env_passthrough: ['A,B']}", "tool_backends.sidecars[0].env_passthrough: 'A,B' is not a"),
    ];
    for (entry, expected) in cases {
        let got = message(&format!("{base}{entry}\n"), &opts());
        assert!(got.starts_with(expected), "{entry}: {got}");
    }
    build_yaml(&format!("{base}env: {{_A1: v}}, env_passthrough: [NPM_TOKEN]}}\n"), &opts()).unwrap();
}

#[test]
fn warnings_and_token() {
    let run = build_yaml(&format!("{SEED_PROFILE}\nssh: {{host: build.example}}\n"), &opts()).unwrap();
    assert_eq!(run.warnings.len(), 1, "{:?}", run.warnings);
    assert!(run.warnings[0].contains("two filesystems"));
    assert!(!build_yaml("", &RunOptions { no_token: true, ..opts() }).unwrap().token);
}

/// A key file and a known_hosts file on this machine, in a fresh folder.
fn ssh_files() -> (tempfile::TempDir, PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (key, known) = (root.join("id_ed25519"), root.join("known_hosts"));
    std::fs::write(&key, "KEY\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&known, "[mac.example]:2222 ssh-ed25519 AAAA\n").unwrap();
    (dir, key, known)
}

#[test]
fn the_ssh_block_becomes_the_agents_variables_and_read_only_binds() {
    let (_dir, key, known) = ssh_files();
    let yaml = format!(
        "volumes: [{{source: '${{CWD}}', target: /src}}]\n\
         ssh:\n  host: mac.example\n  port: 2222\n  user: builder\n  key_path: {}\n  known_hosts: {}\n  \
         host_cwd: /Users/me/app\n  host_path: [/opt/homebrew/bin, /usr/local/bin]\n  login_shell: true\n  \
         tty: false\n  env_passthrough: [DEVELOPER_DIR, GOFLAGS]\n  commands: [xcodebuild, swift]\n  \
         control_persist: 0\n  host_key_alias: null\n",
        key.display(),
        known.display()
    );
    let run = build_yaml(&yaml, &opts()).unwrap();
    let ssh = run.ssh.as_ref().expect("an SSH backend");
    let env: Vec<_> = ssh.env_list();
    assert_eq!(
        env,
        [
            "SSH_COMMANDS=xcodebuild,swift",
            "SSH_CONTROL_PERSIST=0",
            "SSH_ENV_PASSTHROUGH=DEVELOPER_DIR,GOFLAGS",
            "SSH_HOST=mac.example",
            "SSH_HOST_CWD=/Users/me/app",
            "SSH_HOST_PATH=/opt/homebrew/bin:/usr/local/bin",
            "SSH_KEY_PATH=/run/secrets/ssh-key",
            "SSH_KNOWN_HOSTS=/run/secrets/ssh-known-hosts",
            "SSH_LOGIN_SHELL=1",
            "SSH_PORT=2222",
            "SSH_TTY=0",
            "SSH_USER=builder",
            // Not in the block: the agent's workspace (its volume at /src), not ssh-exec's default /workspace.
            "SSH_WORKSPACE=/src",
        ]
    );
    let file = |path: &Path, target: &str| Volume {
        source: VolumeSource::Host(path.to_path_buf()),
        target: target.to_owned(),
        read_only: true,
    };
    assert_eq!(ssh.mounts(), [file(&key, "/run/secrets/ssh-key"), file(&known, "/run/secrets/ssh-known-hosts")]);
    // No builders: no "two filesystems" warning.
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    // The agent's user owns the key (mode 0600): readable.
    let me = nix::unistd::getuid().as_raw();
    assert!(ssh.unreadable_by(&format!("{me}:{me}")).is_none());

    // `-e SSH_KEY_PATH=…` (a key inside the agent image) wins: that variable and its bind go, the rest stays.
    let without = ssh.without(&["SSH_KEY_PATH", "SSH_TTY"]);
    assert!(!without.env.contains_key("SSH_KEY_PATH") && !without.env.contains_key("SSH_TTY"));
    assert_eq!(without.mounts(), [file(&known, "/run/secrets/ssh-known-hosts")]);
    assert_eq!(without.env["SSH_HOST"], "mac.example");
}

#[test]
fn ssh_file_paths_relative_home_and_cwd() {
    let (dir, key, _) = ssh_files();
    let root = dir.path().canonicalize().unwrap();
    let relative = RunOptions { workspace: Some(root.clone()), ..opts() };
    let profile = Profile::parse("ssh: {host: h, key_path: ./id_ed25519}", "test.yaml").unwrap();
    let run = RunConfig::build(&relative, profile, &root, WorkspaceLookup::Resolve).unwrap();
    assert_eq!(run.ssh.unwrap().files["SSH_KEY_PATH"].source, VolumeSource::Host(key.clone()));
    let run = build_yaml("ssh: {host: h, key_path: '${CWD}/id_ed25519'}", &relative).unwrap();
    assert_eq!(run.ssh.unwrap().files["SSH_KEY_PATH"].source, VolumeSource::Host(key.clone()));
    // With builders, SSH_WORKSPACE is their workspace_target.
    let run = build_yaml(&format!("{SEED_PROFILE}\nssh: {{host: h}}\n"), &opts()).unwrap();
    assert_eq!(run.ssh.unwrap().env["SSH_WORKSPACE"], "/workspace");
    // `~/` is $HOME's (read, not set: other tests run in this process).
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.join(".profile").is_file()) {
        let run = build_yaml("ssh: {host: h, known_hosts: ~/.profile}", &opts()).unwrap();
        let source = &run.ssh.unwrap().files["SSH_KNOWN_HOSTS"].source;
        assert_eq!(*source, VolumeSource::Host(home.join(".profile").canonicalize().unwrap()));
    }
}

#[test]
fn ssh_block_mistakes_are_named_by_key() {
    let (_dir, key, _) = ssh_files();
    let cases = [
        ("ssh: mac.example", "ssh must be a mapping of the SSH backend's settings (host, port, user, key_path, "),
        ("ssh: {port: 22}", "ssh.host is required: the host that runs the commands"),
        ("ssh: {host: '  '}", "ssh.host is required: the host that runs the commands"),
        ("ssh: {host: h, hostname: x}", "ssh.hostname is not a setting of the SSH backend (one of: host, port, "),
        ("ssh: {host: h, port: 0}", "ssh.port must be a whole number from 1 to 65535"),
        ("ssh: {host: h, port: 70000}", "ssh.port must be a whole number from 1 to 65535"),
        ("ssh: {host: h, port: '22'}", "ssh.port must be a whole number from 1 to 65535"),
        ("ssh: {host: h, connect_timeout: -1}", "ssh.connect_timeout must be a whole number"),
        ("ssh: {host: h, tty: 1}", "ssh.tty must be true or false"),
        ("ssh: {host: true}", "ssh.host must be a string"),
        ("ssh: {host: h, commands: [[a]]}", "ssh.commands must be a list of strings, or one string"),
        ("ssh: {host: h, key_path: 3}", "ssh.key_path must be a file path on this machine"),
        ("ssh: {host: h, key_path: /nonexistent/id_rsa}", "ssh.key_path /nonexistent/id_rsa: No such file"),
        ("ssh: {host: h, known_hosts: /tmp}", "ssh.known_hosts /tmp: not a file"),
    ];
    for (yaml, expected) in cases {
        let got = message(yaml, &opts());
        assert!(got.starts_with(expected), "for {yaml}:\n{got}\nexpected it to start with:\n{expected}");
    }
    // One string is a list as written; null is unset.
    let run = build_yaml(
        &format!("ssh: {{host: h, commands: 'xcodebuild swift', key_path: {}, user: ~}}", key.display()),
        &opts(),
    );
    let ssh = run.unwrap().ssh.unwrap();
    assert_eq!(ssh.env["SSH_COMMANDS"], "xcodebuild swift");
    assert!(!ssh.env.contains_key("SSH_USER"));
    // No block, or `ssh: null`: no backend.
    assert!(build_yaml("ssh:\n", &opts()).unwrap().ssh.is_none());
    assert!(build_yaml("", &opts()).unwrap().ssh.is_none());
}

#[test]
fn an_ssh_file_only_its_owner_reads_is_refused_for_another_agent_user() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, key, known) = ssh_files();
    let yaml = format!("ssh: {{host: h, key_path: {}, known_hosts: {}}}", key.display(), known.display());
    let ssh = build_yaml(&yaml, &opts()).unwrap().ssh.unwrap();
    let me = nix::unistd::getuid().as_raw();
    let other = me + 1;
    // The key is 0600 and ours: another uid (or the image's root, which has no capabilities) cannot read it.
    let refused = ssh.unreadable_by(&format!("{other}:{other}")).expect("refused").to_string();
    assert_eq!(
        refused,
        format!(
            "ssh.key_path {} (uid {me}, mode 600) cannot be read by the agent's user '{other}:{other}': run the agent \
             as uid {me} (--agent-user {me}:GID, or an agent image built with AGENT_UID={me})",
            key.display()
        )
    );
    if me != 0 {
        assert!(ssh.unreadable_by("").expect("root refused").to_string().contains("agent's user 'root'"));
    }
    // A user name cannot be mapped here: not refused. A group- or world-readable file is readable.
    assert!(ssh.unreadable_by("agent").is_none());
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(ssh.unreadable_by(&other.to_string()).is_none());
    // known_hosts (0644 by default here) is fine; made private, it is named.
    std::fs::set_permissions(&known, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(ssh.unreadable_by(&other.to_string()).expect("refused").to_string().starts_with("ssh.known_hosts "));
}
