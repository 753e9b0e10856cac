//! What the host's shell runs for one call, and how it reports back.
//!
//! ssh gives a client only the remote shell's exit status, and 255 means both "ssh failed" and "the command exited
//! 255"; a command killed by a signal also comes back as 255. So the host's shell reports on a side channel:
//! two marker lines on stderr (on stdout in a call with a terminal, which merges the streams), each starting with
//! a random 32-hex-digit nonce made for this call, which the client removes from the output:
//!
//! - `<nonce>:start:<pid>` first, before anything else the shell does: the command is about to run, and `<pid>` is
//!   the shell's pid, which leads the session's process group (sshd makes every session's shell a session leader),
//!   so the command and everything it starts are in process group `<pid>`. No marker: the command never started.
//! - `<nonce>:exit:<code>` after the command, with the shell's status for it (128+N when it died of signal N); or
//!   `<nonce>:cwd` when the host directory cannot be entered (the command is not run).
//!
//! Transport failure = no start marker and ssh exits 255. A start marker without an exit marker means the connection
//! was lost (or the shell was killed) while the command ran.

use protocol::shell::{join, quote};

/// A per-call random token that marks the side channel's lines, so no output can be mistaken for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nonce(pub String);

impl Nonce {
    /// 128 random bits as 32 hex digits, from the standard library's per-process random hash keys (seeded by the
    /// OS), mixed with the pid and the time.
    pub fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let half = |salt: u64| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(salt);
            hasher.write_u32(std::process::id());
            hasher.write_u128(now.as_nanos());
            hasher.finish()
        };
        Nonce(format!("{:016x}{:016x}", half(1), half(2)))
    }
}

impl Default for Nonce {
    fn default() -> Self {
        Self::new()
    }
}

/// What the call runs once the shell is ready.
#[derive(Debug, Clone, Copy)]
pub enum ScriptBody<'a> {
    /// A command line, each word literal.
    Command(&'a [String]),
    /// Nothing: `--check` (connect, enter the directory).
    Check,
    /// `--probe`: print each of these names the host can run.
    Probe(&'a [String]),
}

/// The shell-side settings of one call.
#[derive(Debug, Clone)]
pub struct ShellSetup<'a> {
    pub nonce: &'a Nonce,
    /// The host directory to enter; `None` stays in the login directory.
    pub cwd: Option<&'a str>,
    pub env: &'a [(String, String)],
    /// Put before the host's PATH.
    pub path_prefix: Option<&'a str>,
    /// Run the script in `$SHELL -l` (reads the host's profile).
    pub login_shell: bool,
}

/// The most script text one call may send. Linux limits one argument of exec to 128 KiB (MAX_ARG_STRLEN), and sshd
/// passes the whole line to the shell as one; beyond it the host would fail with "Argument list too long".
pub const MAX_SCRIPT_BYTES: usize = 120 * 1024;

/// The text for ssh's command argument. Everything variable is single-quoted ([`quote`]); the rest is plain POSIX
/// shell that sh, dash, bash, zsh and ksh run alike (csh and fish are not supported as the user's shell).
pub fn script(call: &ShellSetup, body: ScriptBody) -> String {
    let nonce = &call.nonce.0;
    let mut lines = vec![format!("printf '%s:start:%s\\n' {nonce} \"$$\" >&2")];
    // The signals ssh-exec delivers go to the whole group, this shell included, and a terminal's Ctrl-C and Ctrl-\
    // too: caught (not ignored, which the command would inherit), the shell outlives them and reports how the
    // command ended with them.
    lines.push("trap : INT TERM HUP QUIT".into());
    for (name, value) in call.env {
        lines.push(format!("{name}={}; export {name}", quote(value)));
    }
    if let Some(prefix) = call.path_prefix {
        lines.push(format!("PATH={}:\"$PATH\"; export PATH", quote(prefix)));
    }
    if let Some(cwd) = call.cwd {
        lines.push(format!("cd -- {} 2>/dev/null || {{ printf '%s:cwd\\n' {nonce} >&2; exit 2; }}", quote(cwd)));
    }
    match body {
        // bash reports a foreground command killed by a signal ("Killed", with our command line) on its own
        // stderr: the shell's stderr is /dev/null meanwhile, the command's is the real one (fd 3).
        ScriptBody::Command(words) => {
            lines.push("exec 3>&2 2>/dev/null".into());
            // A command that cannot run gets the shell's codes (127, 126) and the words sidecar-exec gives them, not
            // each host shell's own ("sh: 1: x: not found", "zsh: command not found: x").
            let program = quote(words.first().map_or("", String::as_str));
            lines.push(format!(
                "c={program}; s=\n\
                 case $c in\n\
                 */*) if [ ! -e \"$c\" ]; then printf '%s: No such file or directory\\n' \"$c\" >&3; s=127\n\
                 elif [ -d \"$c\" ] || [ ! -x \"$c\" ]; then printf '%s: Permission denied\\n' \"$c\" >&3; s=126; fi ;;\n\
                 *) command -v \"$c\" >/dev/null 2>&1 || {{ printf '%s: command not found\\n' \"$c\" >&3; s=127; }} ;;\n\
                 esac"
            ));
            lines.push(format!("if [ -z \"$s\" ]; then {} 2>&3 3>&-; s=$?; fi", join(words)));
            lines.push("exec 2>&3 3>&-".into());
        }
        ScriptBody::Check => lines.push("true".into()),
        ScriptBody::Probe(names) => lines.push(format!(
            "for c in {}; do command -v \"$c\" >/dev/null 2>&1 && printf '%s\\n' \"$c\"; done; true",
            join(names)
        )),
    }
    if !matches!(body, ScriptBody::Command(_)) {
        lines.push("s=$?".into());
    }
    // ksh93 reports a signal death as 256+N; every other shell as 128+N, which is what we promise.
    lines.push("[ \"$s\" -gt 255 ] && s=$((s - 128))".into());
    // Whatever the command left in its group (background jobs) ends with it, as with exec-server. The shell itself
    // ignores this TERM: it still has to report.
    lines.push("trap '' TERM; kill -TERM -$$ 2>/dev/null".into());
    lines.push(format!("printf '%s:exit:%s\\n' {nonce} \"$s\" >&2; exit \"$s\"", nonce = nonce));
    let script = lines.join("\n");
    if call.login_shell {
        format!("exec \"$SHELL\" -l -c {}", quote(&script))
    } else {
        script
    }
}

/// The script of the second session that delivers signal `name` (`INT`, `TERM`, `HUP`) to the command's whole
/// process group `pgid`, as it came to ssh-exec. It succeeds when the group is already gone (the command ended
/// meanwhile: nothing left to signal).
pub fn signal_script(pgid: i32, name: &str) -> String {
    format!("kill -{name} -{pgid} 2>/dev/null || ! kill -0 -{pgid} 2>/dev/null")
}

/// The script of the second session that stops the command's group `pgid` for Ctrl-Z: TSTP (a handler sees it),
/// then STOP. The group is orphaned there (its leader's session is its own, its parent sshd in another), and the
/// kernel discards a TSTP whose action is to stop a process of an orphaned group (POSIX), so TSTP alone would stop
/// nothing; STOP is not discarded. (A command that ignores TSTP is stopped too: the one difference from native.)
pub fn tstp_script(pgid: i32) -> String {
    format!("kill -TSTP -{pgid} 2>/dev/null; kill -STOP -{pgid} 2>/dev/null || ! kill -0 -{pgid} 2>/dev/null")
}

/// The script of the second session that stops a running command: SIGTERM (and SIGCONT, so a stopped process sees
/// it) to the whole process group `pgid`, up to `grace_tenths` tenths of a second for it to go (`SSH_STOP_GRACE`),
/// then SIGKILL. It ends as soon as the group is gone.
pub fn stop_script(pgid: i32, grace_tenths: u32) -> String {
    format!(
        "g={pgid}\nkill -TERM -$g 2>/dev/null || exit 0\nkill -CONT -$g 2>/dev/null\ni=0\n\
         while kill -0 -$g 2>/dev/null; do\n  \
         if [ $i -ge {grace_tenths} ]; then kill -KILL -$g 2>/dev/null; exit 0; fi\n  \
         sleep 0.1; i=$((i + 1))\ndone"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ() {
        let (a, b) = (Nonce::new(), Nonce::new());
        assert_ne!(a, b);
        assert_eq!(a.0.len(), 32);
        assert!(a.0.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    /// The script, run by a local sh in a fresh session, reports as the protocol says.
    #[test]
    fn the_script_reports_start_and_exit() {
        let nonce = Nonce::new();
        let words = ["sh".to_owned(), "-c".to_owned(), "echo out; echo err >&2; exit 7".to_owned()];
        let env = [("GREETING".to_owned(), "it's; $(x)\n".to_owned())];
        let call =
            ShellSetup { nonce: &nonce, cwd: Some("/"), env: &env, path_prefix: Some("/nowhere"), login_shell: false };
        let output = std::process::Command::new("setsid")
            .args(["-w", "sh", "-c", &script(&call, ScriptBody::Command(&words))])
            .output();
        let Ok(output) = output else { return };
        let stderr = String::from_utf8_lossy(&output.stderr);
        let mut lines = stderr.lines();
        assert!(lines.next().unwrap().starts_with(&format!("{}:start:", nonce.0)), "{stderr}");
        assert_eq!(lines.next(), Some("err"));
        assert_eq!(lines.next(), Some(format!("{}:exit:7", nonce.0).as_str()));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
        assert_eq!(output.status.code(), Some(7));
    }
}
