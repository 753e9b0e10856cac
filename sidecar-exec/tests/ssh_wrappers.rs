//! The installer's three-way order (native > sidecar > SSH), what it asks the SSH host (one `ssh-exec --probe`,
//! so only commands the host has are wrapped), and a generated SSH wrapper at work.

use std::ffi::OsStr;
use std::path::Path;

use crate::sshd::*;
use crate::support::{client_run, executable, names, server_with, BIN};

#[tokio::test(flavor = "multi_thread")]
async fn native_beats_sidecar_beats_ssh() {
    let scratch = tempfile::tempdir().unwrap();
    let wrappers = scratch.path().join("wrappers");
    let native = scratch.path().join("native-bin");
    executable(&native, "node", "#!/bin/sh\n");
    executable(&native, "go", "#!/bin/sh\n");
    let install = |ssh_host: Option<&str>| {
        let client = client_run()
            .env("PATH", format!("{}:{}", wrappers.display(), native.display()))
            .env("BUILD_SIDECARS", r#"{"node":{"internal_url":"http://b:1"},"python":{"internal_url":"http://c:1"}}"#)
            .env("SSH_COMMANDS", "xcodebuild, swift npm");
        let client = match ssh_host {
            Some(host) => client.env("SSH_HOST", host),
            None => client,
        };
        client.args(["--install-wrappers", wrappers.to_str().unwrap()]).run()
    };
    let output = install(Some("build-mac")).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    // Nothing answers at b:1 and c:1: one line each says their whole table is wrapped. No host build-mac either:
    // one line says every command it could take is wrapped.
    let (unanswered, lines): (Vec<&str>, Vec<&str>) =
        message.lines().partition(|line| line.contains("sidecar gave no /info"));
    assert_eq!((unanswered.len(), lines.len()), (2, 3), "{message}");
    assert!(
        lines[0].starts_with("sidecar-exec: the SSH host build-mac gave no list of its commands (ssh-exec --probe: ")
            && lines[0].contains(
                "wrapping all its commands [java javac mvn gradle gofmt cargo rustc rustfmt clippy xcodebuild swift]"
            ),
        "{message}"
    );
    // Said once: node and python could use either backend, and so could npm of SSH_COMMANDS; their sidecar wins.
    assert!(lines[1].contains("both BUILD_SIDECARS and SSH_HOST are set: [node python npm]"), "{message}");
    assert!(
        lines[2].contains(
            "sidecar [npm npx pnpm yarn python python3 pip pip3 poetry pytest ruff black mypy]; \
             ssh [java javac mvn gradle gofmt cargo rustc rustfmt clippy xcodebuild swift host-run auto-run]; \
             native, not wrapped [go node]"
        ),
        "{message}"
    );
    // Each wrapper is a link to its client; the link's name is the command (wrappers/called_as.rs).
    let link = |name: &str| std::fs::read_link(wrappers.join(name)).unwrap();
    let sidecar_exec = std::fs::canonicalize(BIN).unwrap();
    assert_eq!(link("npm"), sidecar_exec);
    for ssh_wrapper in ["gofmt", "host-run", "auto-run", "xcodebuild"] {
        assert_eq!(link(ssh_wrapper), sidecar_exec.with_file_name("ssh-exec"), "{ssh_wrapper}");
    }
    assert!(!wrappers.join("node").exists() && !wrappers.join("go").exists());

    // Without SSH_HOST the host's wrappers go; the sidecars' stay.
    let output = install(None).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("ssh []; native, not wrapped [node]"), "{}", stderr(&output));
    assert!(names(&wrappers).iter().all(|name| protocol::commands_for("node").unwrap().contains(&name.as_str())
        || protocol::commands_for("python").unwrap().contains(&name.as_str())));

    // A bad SSH_COMMANDS entry is refused.
    let output = client_run()
        .env("SSH_HOST", "h")
        .env("SSH_COMMANDS", "ok ../../bin/sh")
        .args(["--install-wrappers", wrappers.to_str().unwrap()])
        .run()
        .await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("SSH_COMMANDS names \"../../bin/sh\""), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_generated_ssh_wrapper_runs_on_the_host_with_arguments_intact() {
    let sshd = sshd!();
    let wrappers = sshd.path("wrappers");
    let host_bin = sshd.host_cwd.path().join("bin");
    executable(&host_bin, "only-on-host", "#!/bin/sh\nprintf 'host:'; printf ' [%s]' \"$@\"; echo\n");
    let path = format!("{}:/usr/bin:/bin", wrappers.display());
    let message = install_for(&sshd, &wrappers, |run| {
        run.env("PATH", &path).env("SSH_HOST_PATH", &host_bin).env("SSH_COMMANDS", "only-on-host")
    })
    .await;
    assert!(names(&wrappers).contains(&"only-on-host".to_owned()), "{message}");

    let mut wrapper =
        sshd.client().env("PATH", &path).env("SSH_HOST_PATH", &host_bin).other(wrappers.join("only-on-host"));
    wrapper.args(["a b", "it's", "; echo x"]);
    let output = wrapper.output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "host: [a b] [it's] [; echo x]\n");
}

/// An agent image with only ssh-exec (no HTTP client) installs its wrappers with ssh-exec itself, through the
/// entrypoint as an image runs it; a BUILD_SIDECARS it cannot serve without sidecar-exec is refused.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_with_only_ssh_exec_installs_its_wrappers() {
    let scratch = tempfile::tempdir().unwrap();
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let ssh_exec = bin.join("ssh-exec");
    std::fs::copy(SSH_BIN, &ssh_exec).unwrap();
    let wrappers = scratch.path().join("wrappers");
    let entrypoint = concat!(env!("CARGO_MANIFEST_DIR"), "/../wrappers/entrypoint.sh");
    let boot = |sidecars: Option<&str>| {
        let mut command = tokio::process::Command::new(entrypoint);
        command
            .args(["sh", "-c", "command -v gofmt; command -v host-run"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("SSH_HOST", "build-mac")
            .env("SIDECAR_WRAPPERS_DIR", &wrappers)
            .env("SIDECAR_EXEC", &ssh_exec);
        if let Some(sidecars) = sidecars {
            command.env("BUILD_SIDECARS", sidecars);
        }
        command.output()
    };
    let output = boot(None).await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    assert!(lines[0].starts_with("ssh-exec: the SSH host build-mac gave no list of its commands"), "{message}");
    assert!(lines[1].starts_with("ssh-exec: wrappers in "), "{message}");
    let canonical = wrappers.canonicalize().unwrap();
    // A gofmt of the machine's own (Go installed here) wins over its wrapper, as native commands do on an image.
    let native_gofmt = ["/usr/bin/gofmt", "/bin/gofmt"].into_iter().map(Path::new).find(|path| path.exists());
    let gofmt = native_gofmt.map_or_else(|| canonical.join("gofmt"), Path::to_path_buf);
    assert_eq!(stdout(&output), format!("{}\n{}\n", gofmt.display(), canonical.join("host-run").display()));
    let wrapped = if native_gofmt.is_some() { "host-run" } else { "gofmt" };
    assert_eq!(std::fs::read_link(wrappers.join(wrapped)).unwrap(), ssh_exec.canonicalize().unwrap());

    let output = boot(Some(r#"{"go":{"internal_url":"http://builder-go:8080"}}"#)).await.unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let expected = format!(
        "ssh-exec: FATAL: BUILD_SIDECARS is set but {} does not exist: install sidecar-exec beside ssh-exec, or unset \
         BUILD_SIDECARS",
        bin.join("sidecar-exec").display()
    );
    assert!(stderr(&output).starts_with(&expected), "{}", stderr(&output));
    assert!(output.stdout.is_empty(), "the container's command must not run");
}

/// `sidecar-exec --install-wrappers WRAPPERS` with this server's settings, `configure` adding to them, on a PATH
/// holding only ssh (so none of the runtimes' commands is native); what it said, once it exited 0.
async fn install_for(sshd: &Sshd, wrappers: &Path, configure: impl FnOnce(BinaryRun) -> BinaryRun) -> String {
    let run = configure(sshd.configure(client_run()).env("PATH", sshd.ssh_client_only()));
    let output = run.args([OsStr::new("--install-wrappers"), wrappers.as_os_str()]).run().await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stderr(&output)
}

/// The names the installer asks the host about: the runtime table's, then `extras` (SSH_COMMANDS).
fn table_and(extras: &[&str]) -> Vec<String> {
    let table = protocol::RUNTIMES.iter().flat_map(|(_, commands)| commands.iter());
    table.chain(extras).map(|name| (*name).to_owned()).collect()
}

/// The PATH a command gets on the host with SSH_HOST_PATH=`host_bin`, asked of the host.
async fn host_path(sshd: &Sshd, host_bin: &Path) -> String {
    // On a connection of its own, which does not stay: a test that counts logins counts those that come after.
    let client = sshd.client().env("SSH_CONTROL_PERSIST", "0").env("SSH_HOST_PATH", host_bin);
    let output = client.args(["sh", "-c", "printf %s \"$PATH\""]).run().await;
    assert_eq!(output.status.code(), Some(0), "asking the host for its PATH: {}", stderr(&output));
    stdout(&output)
}

/// Whether bash finds `command` on `path`.
async fn finds(command: &str, path: &str) -> bool {
    let mut bash = tokio::process::Command::new("/bin/bash");
    bash.args(["-c", &format!("command -v {command} >/dev/null")]).env_clear().env("PATH", path);
    bash.status().await.unwrap().success()
}

/// `script` in bash with `run`'s environment and folder and `path` as PATH.
async fn bash(run: BinaryRun, path: impl AsRef<OsStr>, script: &str) -> std::process::Output {
    run.env("PATH", path).other("/bin/bash").args(["-c", script]).output().await.unwrap()
}

/// Only what the host has is wrapped, asked in one connection however many names (and once more with no shared
/// connection). Through the wrappers bash finds exactly what it finds natively with the host's PATH, and a command
/// the host lacks fails as natively: `command -v` fails, a call gives bash's 127 and its message, byte for byte;
/// one the host has runs there.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn only_commands_the_host_has_are_wrapped_asked_in_one_connection() {
    let sshd = sshd!();
    let wrappers = sshd.path("wrappers");
    let host_bin = sshd.host_cwd.path().join("bin");
    executable(&host_bin, "only-on-host", "#!/bin/sh\nprintf 'host:'; printf ' [%s]' \"$@\"; echo\n");
    let extras = ["only-on-host", "on-no-host"];
    let asked = table_and(&extras);
    let host_path = host_path(&sshd, &host_bin).await;
    let (mut has, mut lacks) = (Vec::new(), Vec::new());
    for name in &asked {
        match finds(name, &host_path).await {
            true => has.push(name.clone()),
            false => lacks.push(name.clone()),
        }
    }
    for persist in ["60", "0"] {
        let logins = sshd.logins();
        let message = install_for(&sshd, &wrappers, |run| {
            run.env("SSH_HOST_PATH", &host_bin)
                .env("SSH_COMMANDS", extras.join(" "))
                .env("SSH_CONTROL_PERSIST", persist)
        })
        .await;
        assert_eq!(message.lines().count(), 1, "{message}");
        assert_eq!(
            sshd.logins() - logins,
            1,
            "SSH_CONTROL_PERSIST={persist}: {} names, one login: {message}",
            asked.len()
        );
        assert!(message.contains(&format!("not on the host, not wrapped [{}]", lacks.join(" "))), "{message}");
        let mut expected = has.clone();
        expected.extend(["host-run".to_owned(), "auto-run".to_owned()]);
        expected.sort();
        assert_eq!(names(&wrappers), expected, "{message}");
    }

    // The agent's shell, natively with the host's PATH and here through the wrappers: the same bytes.
    let mut script: String = asked
        .iter()
        .map(|name| format!("command -v {name} >/dev/null && echo '{name}: found' || {{ {name} --version; echo \"{name}: $?\"; }}\n"))
        .collect();
    script.push_str("only-on-host 'a b' \"it's\"\n");
    let agent = || sshd.client().env("SSH_HOST_PATH", &host_bin);
    let native = bash(agent(), &host_path, &script).await;
    let through_wrappers = format!("{}:{}", wrappers.display(), sshd.ssh_client_only().display());
    let forwarded = bash(agent(), &through_wrappers, &script).await;
    let seen = |output: &std::process::Output| (output.status.code(), stdout(output), stderr(output));
    assert_eq!(seen(&forwarded), seen(&native));
    assert!(stdout(&native).contains("on-no-host: 127\nhost: [a b] [it's]\n"), "{}", stdout(&native));
    assert!(stderr(&native).contains("on-no-host: command not found"), "{}", stderr(&native));
}

/// A host that cannot be reached at install time: the agent still starts (exit 0) and every command the host could
/// take is wrapped, as for a sidecar that gives no list, with one line that says why and what to do.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn an_unreachable_host_gets_every_command_and_one_line() {
    let mut sshd = sshd!();
    sshd.stop();
    let wrappers = sshd.path("wrappers");
    let message = install_for(&sshd, &wrappers, |run| run.env("SSH_COMMANDS", "xcodebuild")).await;
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    let port = sshd.port;
    let asked = table_and(&["xcodebuild"]);
    assert!(
        lines[0].starts_with(&format!(
            "sidecar-exec: the SSH host 127.0.0.1 gave no list of its commands (ssh-exec --probe: connection failed, \
             the command did not run: 127.0.0.1:{port} refused the connection: is sshd running there, and on SSH_PORT \
             {port}?; ssh said: "
        )) && lines[0].ends_with(&format!(
            "): wrapping all its commands [{}]; one it lacks fails when called (127); run this again once it is up",
            asked.join(" ")
        )),
        "{message}"
    );
    let mut expected = asked;
    expected.extend(["host-run".to_owned(), "auto-run".to_owned()]);
    expected.sort();
    assert_eq!(names(&wrappers), expected, "{message}");
}

/// A host that accepts the connection and never answers costs the installer its bound (5 s), then the same as an
/// unreachable one; the probe and every ssh it started are gone when the installer ends: with the shared connection
/// (a master being started) and without (ssh-exec's ssh in a process group of its own).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_host_that_never_answers_costs_its_bound_and_leaves_nothing() {
    let sshd = sshd!();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let wrappers = sshd.path("wrappers");
    // What is left running, with its command line: ssh-exec's and its session's name the marker (the names asked),
    // a master's the private folder (its ControlPath).
    let left = |marker: &str| -> Vec<String> {
        let mut pids = testkit::processes_matching(marker);
        pids.extend(testkit::processes_matching(&sshd.runtime_dir().to_string_lossy()));
        let cmdline = |pid| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        pids.into_iter().map(|pid| String::from_utf8_lossy(&cmdline(pid)).replace('\0', " ")).collect()
    };
    for persist in ["60", "0"] {
        let marker = format!("silent-{}", testkit::marker());
        let message = install_for(&sshd, &wrappers, |run| {
            run.env("SSH_PORT", &port).env("SSH_COMMANDS", &marker).env("SSH_CONTROL_PERSIST", persist)
        })
        .await;
        assert!(
            message.starts_with(
                "sidecar-exec: the SSH host 127.0.0.1 gave no list of its commands (ssh-exec --probe: no answer \
                 within 5 s): wrapping all its commands ["
            ) && message.contains(&format!(" {marker}]")),
            "SSH_CONTROL_PERSIST={persist}: {message}"
        );
        assert!(names(&wrappers).contains(&marker), "{message}");
        assert_eq!(left(&marker), Vec::<String>::new(), "SSH_CONTROL_PERSIST={persist}: outlived the installer");
    }
    drop(silent);
}

/// The entrypoint installs at every start, which is the refresh: a command the host gains gets its wrapper at the
/// next start, and one it loses has its wrapper removed, so `command -v` keeps telling the truth.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn the_entrypoint_refreshes_what_the_host_has() {
    let sshd = sshd!();
    let wrappers = sshd.path("wrappers");
    let host_bin = sshd.host_cwd.path().join("bin");
    std::fs::create_dir_all(&host_bin).unwrap();
    let entrypoint = concat!(env!("CARGO_MANIFEST_DIR"), "/../wrappers/entrypoint.sh");
    let boot = || {
        sshd.configure(BinaryRun::new(entrypoint))
            .current_dir(sshd.workspace.path())
            .env("PATH", "/usr/bin:/bin")
            .env("SSH_HOST_PATH", &host_bin)
            .env("SSH_COMMANDS", "late-tool")
            .env("SIDECAR_WRAPPERS_DIR", &wrappers)
            .env("SIDECAR_EXEC", BIN)
            .args(["sh", "-c", "if command -v late-tool; then late-tool now; else echo none; fi"])
            .run()
    };
    let before = boot().await;
    assert_eq!((before.status.code(), stdout(&before)), (Some(0), "none\n".to_owned()), "{}", stderr(&before));
    assert!(stderr(&before).contains(" late-tool]; removed []"), "{}", stderr(&before));

    executable(&host_bin, "late-tool", "#!/bin/sh\necho \"late-tool on the host: $*\"\n");
    let gained = boot().await;
    assert_eq!(gained.status.code(), Some(0), "{}", stderr(&gained));
    assert_eq!(stdout(&gained), format!("{}\nlate-tool on the host: now\n", wrappers.join("late-tool").display()));

    std::fs::remove_file(host_bin.join("late-tool")).unwrap();
    let lost = boot().await;
    assert_eq!((lost.status.code(), stdout(&lost)), (Some(0), "none\n".to_owned()), "{}", stderr(&lost));
    assert!(stderr(&lost).contains(" late-tool]; removed [late-tool]"), "{}", stderr(&lost));
    assert!(!wrappers.join("late-tool").exists());
}

/// A build sidecar and the SSH host both configured: a command the builder has goes to it, one it lacks goes to the
/// host only if the host has it, and one neither has gets no wrapper. (This machine is the builder, a real
/// exec-server whose `/info` lists the node commands on its PATH, and the host, whose PATH differs.)
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs sshd (Debian's openssh-server); CI runs it"]
async fn a_command_the_builder_lacks_goes_to_the_host_only_if_the_host_has_it() {
    let sshd = sshd!();
    let node = server_with(&["--runtime", "node"], None).await;
    let builder_path = std::env::var("PATH").unwrap();
    let node_table = protocol::commands_for("node").unwrap();
    let mut builder_lacks = Vec::new();
    for command in node_table {
        if !finds(command, &builder_path).await {
            builder_lacks.push(*command);
        }
    }
    assert!(builder_lacks.len() >= 2, "the builder lacks at most one of {node_table:?}: nothing to prove");
    let host_bin = sshd.host_cwd.path().join("bin");
    executable(&host_bin, builder_lacks[0], "#!/bin/sh\n");
    let host_path = host_path(&sshd, &host_bin).await;
    let wrappers = sshd.path("wrappers");
    let sidecars = format!(r#"{{"node":{{"internal_url":"{}"}}}}"#, node.url);
    let message =
        install_for(&sshd, &wrappers, |run| run.env("SSH_HOST_PATH", &host_bin).env("BUILD_SIDECARS", sidecars)).await;
    let sidecar_exec = std::fs::canonicalize(BIN).unwrap();
    let ssh_exec = sidecar_exec.with_file_name("ssh-exec");
    let (mut to_host, mut to_none) = (Vec::new(), Vec::new());
    for (runtime, commands) in protocol::RUNTIMES {
        for command in *commands {
            let expected = if *runtime == "node" && finds(command, &builder_path).await {
                Some(sidecar_exec.clone())
            } else if finds(command, &host_path).await {
                Some(ssh_exec.clone())
            } else {
                None
            };
            assert_eq!(std::fs::read_link(wrappers.join(command)).ok(), expected, "{command}: {message}");
            match expected {
                Some(client) if *runtime == "node" && client == ssh_exec => to_host.push(*command),
                None if *runtime == "node" => to_none.push(*command),
                _ => {}
            }
        }
    }
    assert_eq!(to_host, [builder_lacks[0]], "{message}");
    assert!(!to_none.is_empty(), "the host has every node command the builder lacks: nothing to prove");
    node.stop().await;
}
