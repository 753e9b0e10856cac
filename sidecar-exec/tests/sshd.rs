//! A real OpenSSH server for ssh-exec's tests: Debian's `sshd` on 127.0.0.1 and a free port, with a host key, a
//! user key and its configuration in a temporary folder, run as the user running the tests (no system sshd, no port
//! 22). The "host" is this machine: a temporary folder plays the host's copy of the workspace.
//!
//! The tests that need it are `#[ignore = "needs sshd …"]`, so `cargo test` counts them as ignored with the reason
//! instead of passing without running; `.ci/run` installs openssh-server and runs them (`-- --ignored`). Run so,
//! a test fails with the reason when sshd cannot run (not installed, or not root and a user sshd fails to start).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

pub use crate::support::{stderr, BinaryRun};

pub const SSH_BIN: &str = env!("CARGO_BIN_EXE_ssh-exec");

pub struct Sshd {
    pub port: u16,
    pub user: String,
    /// Keys, configuration, log, and ssh-exec's private folder (XDG_RUNTIME_DIR).
    pub dir: tempfile::TempDir,
    /// The container's workspace (SSH_WORKSPACE) and its folder on the host (SSH_HOST_CWD).
    pub workspace: tempfile::TempDir,
    pub host_cwd: tempfile::TempDir,
    pid: Option<i32>,
}

/// Starts an sshd, or fails the test with why none can run here.
macro_rules! sshd {
    () => {
        crate::sshd::Sshd::start().unwrap_or_else(|reason| panic!("this test needs a real sshd: {reason}"))
    };
}
pub(crate) use sshd;

impl Sshd {
    pub fn start() -> Result<Sshd, String> {
        let Some(sshd) = ["/usr/sbin/sshd", "/usr/local/sbin/sshd"].into_iter().find(|p| Path::new(p).is_file()) else {
            return Err("no sshd here (install Debian's openssh-server; .ci/run does)".into());
        };
        let root = nix::unistd::getuid().is_root();
        let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().map(|u| u.name);
        let Some(user) = user else { return Err("the current uid has no user name, which sshd needs".into()) };
        let dir = tempfile::Builder::new().prefix("sshd-").tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        for name in ["host_key", "user_key"] {
            keygen(&path(name));
        }
        std::fs::copy(path("user_key.pub"), path("authorized_keys")).unwrap();
        let host_public = std::fs::read_to_string(path("host_key.pub")).unwrap();
        if root {
            // sshd's privilege separation folder, which Debian's package makes at boot only.
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            std::fs::write(
                path("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nAuthorizedKeysFile {keys}\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
                     PermitRootLogin prohibit-password\nPidFile {pid}\n\
                     # bash reads ~/.bashrc when sshd starts it with SHLVL unset; this machine's root ~/.bashrc takes\n\
                     # 200 ms (pyenv). SHLVL=1 keeps the user's startup files out of every test and measurement.\n\
                     SetEnv SHLVL=1\n",
                    host_key = path("host_key").display(),
                    keys = path("authorized_keys").display(),
                    pid = path("sshd.pid").display(),
                ),
            )
            .unwrap();
            let status = std::process::Command::new(sshd)
                .arg("-f")
                .arg(path("sshd_config"))
                .arg("-E")
                .arg(path("sshd.log"))
                .stdin(Stdio::null())
                .status()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while status.success() && Instant::now() < deadline {
                let pid = std::fs::read_to_string(path("sshd.pid")).ok().and_then(|p| p.trim().parse::<i32>().ok());
                if let (Some(pid), true) = (pid, std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()) {
                    std::fs::write(
                        path("known_hosts"),
                        format!(
                            "[127.0.0.1]:{port} {}",
                            host_public.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
                        ),
                    )
                    .unwrap();
                    let sshd = Sshd {
                        port,
                        user,
                        dir,
                        workspace: tempfile::Builder::new().prefix("workspace-").tempdir().unwrap(),
                        host_cwd: tempfile::Builder::new().prefix("host-").tempdir().unwrap(),
                        pid: Some(pid),
                    };
                    std::fs::create_dir_all(sshd.runtime_dir()).unwrap();
                    return Ok(sshd);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            last_log = std::fs::read_to_string(path("sshd.log")).unwrap_or_default();
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        if root {
            panic!("sshd did not start as root: {last_log}");
        }
        Err(format!("sshd cannot run as uid {} here: {}", nix::unistd::getuid(), last_log.trim()))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// ssh-exec's private folder for this server's tests (control sockets, locks).
    pub fn runtime_dir(&self) -> PathBuf {
        self.path("run")
    }

    /// A call of the real ssh-exec binary configured for this server, in the workspace.
    pub fn client(&self) -> BinaryRun {
        self.configure(BinaryRun::new(SSH_BIN)).current_dir(self.workspace.path())
    }

    /// `run` (either client, a wrapper installer) with the SSH_* settings that reach this server.
    pub fn configure(&self, run: BinaryRun) -> BinaryRun {
        run.env("SSH_HOST", "127.0.0.1")
            .env("SSH_PORT", self.port.to_string())
            .env("SSH_USER", &self.user)
            .env("SSH_KEY_PATH", self.path("user_key"))
            .env("SSH_KNOWN_HOSTS", self.path("known_hosts"))
            .env("SSH_WORKSPACE", self.workspace.path())
            .env("SSH_HOST_CWD", self.host_cwd.path())
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
    }

    /// A folder holding only OpenSSH's client (`ssh`, linked from this PATH's): for a PATH on which ssh-exec must
    /// find ssh and nothing else (a wrapper installer that must find none of the runtimes' commands).
    pub fn ssh_client_only(&self) -> PathBuf {
        let folder = self.path("ssh-client");
        if !folder.join("ssh").exists() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let ssh = std::env::split_paths(&path).map(|dir| dir.join("ssh")).find(|ssh| ssh.is_file());
            std::fs::create_dir_all(&folder).unwrap();
            std::os::unix::fs::symlink(ssh.expect("OpenSSH's client (ssh) on PATH"), folder.join("ssh")).unwrap();
        }
        folder
    }

    /// How many logins this server has accepted so far (its log's `Accepted publickey` lines, one per connection:
    /// sessions on a shared connection log none).
    pub fn logins(&self) -> usize {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default().matches("Accepted publickey").count()
    }

    /// Stops the server and every connection it serves (sshd's listener leaves running sessions alone; a shared
    /// master would keep its connection), and the masters our clients started.
    pub fn stop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        let mut doomed = vec![pid];
        doomed.extend(testkit::children_of(pid as u32).into_iter().map(|pid| pid as i32));
        doomed
            .extend(testkit::processes_matching(&self.dir.path().to_string_lossy()).into_iter().map(|pid| pid as i32));
        for pid in doomed {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        // Until every process of ours is gone: sshd logs its exit into our folder, which must be empty to go.
        let folder = self.dir.path().to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !testkit::processes_matching(&folder).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The shared masters ssh-exec started for this server (`ssh … ControlMaster=yes`, in our private folder).
    pub fn masters(&self) -> Vec<u32> {
        let folder = self.dir.path().to_string_lossy().into_owned();
        testkit::processes_matching("ControlMaster=yes")
            .into_iter()
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmdline).contains(&folder)
            })
            .collect()
    }

    /// The per-connection sshd processes serving this server's clients (its children).
    pub fn connections(&self) -> Vec<i32> {
        self.pid
            .map(|pid| testkit::children_of(pid as u32).into_iter().map(|pid| pid as i32).collect())
            .unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn keygen(path: &Path) {
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "ssh-exec-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen (OpenSSH's client) is needed");
    assert!(status.success());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A port nobody listens on right now (sshd then binds it; a lost race is retried).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A fresh key that no server accepts.
pub fn stranger_key(dir: &Path) -> PathBuf {
    let key = dir.join("stranger_key");
    keygen(&key);
    key
}
