//! Which commands the SSH host has, asked at install time: one `ssh-exec --probe` for every name that
//! could go to the host, so one ssh connection however many names, within [`PROBE_WITHIN`].

use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use process_group::{Tag, Tagged};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::terminal_safe::terminal_safe;
use crate::wrappers::answer;
use crate::wrappers::backends::SshHostBackend;

/// How long the host has to answer. *Decision:* 5 s, asked at the same time as the sidecars (whose bound is 2 s),
/// so an agent whose host is down or silent still starts within 5 s (with every command wrapped: see
/// [`answer::Answer::lacks`]). More than the sidecars' bound: a real host is reached over a network, and the probe
/// starts the shared connection (key exchange and login, well under a second on a LAN, a second or two across the
/// world), which the agent's first command then reuses.
pub const PROBE_WITHIN: Duration = Duration::from_secs(5);

/// How long a probe that ran out of time has between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// The variable that tags a probe's processes ([`Tag`]): ssh-exec runs its ssh in a process group of its own (and a
/// shared master goes to a session of its own), so stopping the probe's group does not reach it; its environment,
/// which it inherits, does.
const PROBE_TAG: &str = "SIDECAR_EXEC_PROBE";

/// The most of ssh-exec's stderr kept for the message (its one line fits in far less).
const MAX_SAID: u64 = 16 * 1024;
/// What the host may print besides the list (a login shell's profile that talks on stdout), whose lines are ignored.
const MAX_CHATTER: u64 = 64 * 1024;

/// What the host said about its commands: those it has of the names asked, or why it gave no list.
pub type Answer = answer::Answer<ProbeFailed>;

/// Why the host's commands are not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeFailed {
    /// No answer within [`PROBE_WITHIN`] (a host that accepts connections and never answers, a slow login).
    TimedOut,
    /// ssh-exec could not be started: the error.
    NotStarted(String),
    /// ssh-exec ended without a list (the connection failed, a configuration mistake): its status and its line.
    Failed { status: ExitStatus, said: String },
    /// Far more output than a list of the names asked (a host whose shell prints a flood of its own).
    TooMuch,
}

impl answer::WhyNoList for ProbeFailed {
    fn what_to_do(&self) -> &'static str {
        "run this again once it is up"
    }
}

impl fmt::Display for ProbeFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("gave no list of its commands (ssh-exec --probe: ")?;
        match self {
            ProbeFailed::TimedOut => write!(f, "no answer within {} s", PROBE_WITHIN.as_secs())?,
            ProbeFailed::NotStarted(err) => write!(f, "cannot start it: {err}")?,
            ProbeFailed::Failed { said, .. } if !said.is_empty() => f.write_str(said)?,
            ProbeFailed::Failed { status, .. } => write!(f, "it ended with {status} and said nothing")?,
            ProbeFailed::TooMuch => f.write_str("more output than the names asked")?,
        }
        f.write_str(")")
    }
}

/// Asks the host which of `names` it has: `ssh-exec --probe -- NAMES…` (the backend's client, with this process's
/// environment, so the same SSH_* settings, SSH_HOST_PATH and login shell as the wrappers' calls will have), in a
/// process group of its own that is stopped if it overruns [`PROBE_WITHIN`], with every process it started.
pub async fn ask(ssh: &SshHostBackend, names: &[String]) -> Answer {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let tag_value = format!("{}-{}", std::process::id(), now.as_nanos());
    let mut command = tokio::process::Command::new(&ssh.exe);
    command.arg("--probe").arg("--").args(names).env(PROBE_TAG, &tag_value);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut leader = match process_group::spawn_leader(&mut command) {
        Ok(leader) => leader,
        Err(err) => return Answer::Unknown(ProbeFailed::NotStarted(err.to_string())),
    };
    let (stdout, stderr) = (leader.child().stdout.take(), leader.child().stderr.take());
    // The list is at most every name asked, one a line.
    let most = names.iter().map(|name| name.len() as u64 + 1).sum::<u64>() + MAX_CHATTER;
    let ended = tokio::time::timeout(PROBE_WITHIN, async {
        tokio::join!(read_at_most(stdout, most), read_at_most(stderr, MAX_SAID), leader.wait())
    })
    .await;
    let Ok((listed, said, status)) = ended else {
        // ssh-exec first, so that it starts nothing more; then what it started outside its group.
        let _ = process_group::term_then_kill_group(&mut leader, STOP_GRACE).await;
        process_group::term_then_kill(&mut Tagged::new(vec![Tag::new(PROBE_TAG, &tag_value)]), STOP_GRACE).await;
        return Answer::Unknown(ProbeFailed::TimedOut);
    };
    let status = match status {
        Ok(status) => status,
        Err(err) => return Answer::Unknown(ProbeFailed::NotStarted(err.to_string())),
    };
    // Checked first: with its stdout closed, ssh-exec ends with 141.
    let (listed, true) = listed else { return Answer::Unknown(ProbeFailed::TooMuch) };
    if !status.success() {
        return Answer::Unknown(ProbeFailed::Failed { status, said: the_line(&said.0) });
    }
    // Only the names asked count: whatever else a host's shell prints is not a command it has.
    let listed = String::from_utf8_lossy(&listed);
    Answer::Has(names.iter().filter(|name| listed.lines().any(|line| line == name.as_str())).cloned().collect())
}

/// What `pipe` gives up to its end, and whether that was all: at most `most` bytes are read, then the pipe is closed
/// (so its writer stops: ssh-exec, its stdout closed, stops the command).
async fn read_at_most(pipe: Option<impl AsyncRead + Unpin>, most: u64) -> (Vec<u8>, bool) {
    let mut bytes = Vec::new();
    let Some(pipe) = pipe else { return (bytes, true) };
    let _ = pipe.take(most + 1).read_to_end(&mut bytes).await;
    let whole = bytes.len() as u64 <= most;
    bytes.truncate(most as usize);
    (bytes, whole)
}

/// ssh-exec's lines, for ours: without their `ssh-exec: ` prefix, one line, safe for a terminal.
fn the_line(said: &[u8]) -> String {
    let said = String::from_utf8_lossy(said);
    let lines: Vec<&str> = said
        .lines()
        .map(|line| line.trim())
        .filter(|line| !line.is_empty())
        .map(|line| line.strip_prefix("ssh-exec: ").unwrap_or(line))
        .collect();
    terminal_safe(&lines.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_execs_lines_become_one_safe_line_of_ours() {
        let said = b"ssh-exec: connection failed, the command did not run: refused\n\nssh-exec: \x1b[31mred\n";
        assert_eq!(the_line(said), "connection failed, the command did not run: refused; \\x1b[31mred");
        let failed = ProbeFailed::Failed { status: ExitStatus::default(), said: String::new() };
        assert_eq!(
            failed.to_string(),
            "gave no list of its commands (ssh-exec --probe: it ended with exit status: 0 and said nothing)"
        );
        assert_eq!(
            ProbeFailed::TimedOut.to_string(),
            "gave no list of its commands (ssh-exec --probe: no answer within 5 s)"
        );
    }
}
