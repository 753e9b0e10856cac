//! What the binary does around the server in containers: the port file the health probe reads, the port the probe
//! picks, and the start-up warning about a workspace this uid cannot write.
//!
//! The probe is a second process (`exec-server -healthcheck`, the image's HEALTHCHECK), started with the container's
//! environment but not with the server's arguments: `docker run IMAGE exec-server -port 9000` would leave it probing
//! EXEC_SERVER_PORT. So the server writes the port it actually listens on to `--port-file`, and the probe reads it.
//! An explicit `-port` on the probe's own command line still wins (probing another server on purpose).
//!
//! The image puts the port file in /tmp, which commands share (a builder runs as any uid, so a folder owned by one
//! uid would not do). So the file is written atomically through an exclusive temporary that follows no symlink
//! (`agent_files::write_atomic`: a symlink planted under the name is replaced, not written through), and removed at
//! exit only while it is still the file the server wrote (a file someone put there since is left alone).

use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::CommandFactory;
use exec_server::config::{normalize_single_dash, Config, DEFAULT_PORT};

/// The port `-healthcheck` probes: its own `-port` flag, else the port file of the running server, else
/// EXEC_SERVER_PORT, else 8080.
pub fn probe_port(config: &Config) -> u16 {
    let port_flag = Config::command()
        .try_get_matches_from(normalize_single_dash(std::env::args_os()))
        .is_ok_and(|matches| matches.value_source("port") == Some(ValueSource::CommandLine));
    choose_probe_port(port_flag, config.port, config.port_file.as_deref().and_then(read_port))
}

/// The rule of [`probe_port`], without the process: `configured` is --port / EXEC_SERVER_PORT, `from_command_line`
/// says whether it came from the probe's own arguments.
fn choose_probe_port(from_command_line: bool, configured: Option<u16>, published: Option<u16>) -> u16 {
    match (from_command_line, configured, published) {
        (true, Some(port), _) => port,
        (_, _, Some(port)) => port,
        (_, configured, None) => configured.unwrap_or(DEFAULT_PORT),
    }
}

/// A port file that does not exist, is being written, or holds anything but a port counts as absent.
fn read_port(path: &Path) -> Option<u16> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok().filter(|port| *port != 0)
}

/// The published port file; removed again when dropped (a clean exit), so a stale port is not probed later.
pub struct PortFile {
    path: PathBuf,
    /// The device and inode of the file written, and what it holds: only that file is removed (an inode number
    /// alone may be reused by a file put there since).
    written: (u64, u64),
    text: String,
}

impl PortFile {
    /// Writes the listener's port to `path`. A failure is a warning, not fatal: the server works, only a probe
    /// without `-port` falls back to EXEC_SERVER_PORT.
    pub fn publish(path: Option<&Path>, listener: Option<&tokio::net::TcpListener>) -> Option<PortFile> {
        let (path, listener) = (path?, listener?);
        match listener.local_addr().and_then(|addr| PortFile::write(path, addr.port())) {
            Ok(file) => Some(file),
            Err(err) => {
                tracing::warn!(
                    "cannot write the port file {} ({err}): `exec-server -healthcheck` without -port will probe \
                     EXEC_SERVER_PORT or 8080 instead",
                    path.display()
                );
                None
            }
        }
    }
}

impl PortFile {
    fn write(path: &Path, port: u16) -> std::io::Result<PortFile> {
        let text = format!("{port}\n");
        agent_files::write_atomic(path, text.as_bytes())?;
        let written =
            identity(path).ok_or_else(|| std::io::Error::other("the port file vanished as it was written"))?;
        Ok(PortFile { path: path.to_path_buf(), written, text })
    }
}

/// The device and inode of the regular file at `path` (not following a symlink).
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::symlink_metadata(path).ok()?;
    metadata.is_file().then(|| (metadata.dev(), metadata.ino()))
}

impl Drop for PortFile {
    fn drop(&mut self) {
        let ours = identity(&self.path) == Some(self.written)
            && std::fs::read_to_string(&self.path).is_ok_and(|text| text == self.text);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Warns when the workspace exists but this process (its effective uid and groups) cannot create files in it: the
/// health check still passes, so otherwise the first sign is EACCES from npm or pip. Typical cause: the engine
/// created a missing bind-mount source as root. A missing workspace is left to the server's own start-up error.
pub fn warn_if_workspace_unwritable(workspace: &Path) {
    use nix::unistd::{eaccess, getegid, geteuid, AccessFlags};
    if let Err(nix::errno::Errno::EACCES | nix::errno::Errno::EROFS) =
        eaccess(workspace, AccessFlags::W_OK | AccessFlags::X_OK)
    {
        let (uid, gid) = (geteuid(), getegid());
        tracing::warn!(
            "the workspace {} is not writable by uid {uid} (gid {gid}): commands cannot create files there \
             (npm install, pip install and builds fail with EACCES). Make it writable for uid {uid} (create it as \
             that user before the container starts, or chown it), or run the server as its owner",
            workspace.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_prefers_its_own_flag_then_the_port_file_then_the_environment() {
        assert_eq!(choose_probe_port(true, Some(9001), Some(9000)), 9001);
        assert_eq!(choose_probe_port(false, Some(8080), Some(9000)), 9000, "EXEC_SERVER_PORT loses to the file");
        assert_eq!(choose_probe_port(false, Some(8081), None), 8081);
        assert_eq!(choose_probe_port(false, None, None), DEFAULT_PORT);
    }

    #[test]
    fn the_port_file_replaces_a_planted_symlink_and_removes_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (file, victim) = (dir.path().join("port"), dir.path().join("victim"));
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, &file).unwrap();
        let published = PortFile::write(&file, 9000).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep", "written through a planted symlink");
        assert_eq!(read_port(&file), Some(9000));
        drop(published);
        assert!(!file.exists(), "removed at exit");

        let published = PortFile::write(&file, 9000).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "9001\n").unwrap();
        drop(published);
        assert_eq!(read_port(&file), Some(9001), "another's file at the same path is left alone");
    }

    #[test]
    fn a_port_file_is_read_only_when_it_holds_a_port() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("port");
        assert_eq!(read_port(&file), None);
        for (text, port) in [("9000\n", Some(9000)), ("", None), ("90", Some(90)), ("x", None), ("0", None)] {
            std::fs::write(&file, text).unwrap();
            assert_eq!(read_port(&file), port, "{text:?}");
        }
    }
}
