//! When the engine may not raise resource limits: Podman sets its own `nofile` and `nproc` defaults (1048576, and
//! more) on every container, and where its host may not raise limits that high (a hard limit below them, as in a
//! container or a sandbox) the container's start fails with the OCI runtime's "error setting rlimit type 7:
//! operation not permitted". `up` then retries the run once with the documented explicit limits, `nofile` and
//! `nproc` at 4096 each (at most the engine's own hard limit, read from the engine's process when its socket is
//! local), for the limits the run does not set itself. On a remote engine nothing here can tell which limits its
//! host allows, so the run stops and says exactly what to pass.

use std::path::Path;

use crate::model::Ulimit;

/// The limits the documentation gives for such hosts (`--ulimit nofile=4096:4096 --ulimit nproc=4096:4096`).
pub const DOCUMENTED: [(&str, i64); 2] = [("nofile", 4096), ("nproc", 4096)];

/// Whether the engine's text is the runtime's refusal to raise a limit (runc: "error setting rlimit type 7:
/// operation not permitted"; crun: "setrlimit `RLIMIT_NOFILE`: Operation not permitted").
pub fn is_refusal(engine_text: &str) -> bool {
    let text = engine_text.to_lowercase();
    text.contains("rlimit") && text.contains("operation not permitted")
}

/// The limits to retry with: for each documented limit the run does not set, the documented value, at most
/// `hard` of it (the engine's own hard limit, when known). Empty when the run sets them all: its own values are
/// then what the engine refused, and only the operator can choose others.
pub fn fallback(run: &[Ulimit], hard: &dyn Fn(&str) -> Option<i64>) -> Vec<Ulimit> {
    DOCUMENTED
        .iter()
        .filter(|(name, _)| run.iter().all(|u| u.name != *name))
        .map(|&(name, value)| {
            let value = hard(name).filter(|&h| h >= 1).map_or(value, |h| h.min(value));
            Ulimit { name: name.to_owned(), soft: value, hard: value }
        })
        .collect()
}

/// `--ulimit nofile=4096:4096 --ulimit nproc=4096:4096`: the limits as flags.
pub fn as_flags(limits: &[Ulimit]) -> String {
    limits.iter().map(|u| format!("--ulimit {}={}:{}", u.name, u.soft, u.hard)).collect::<Vec<_>>().join(" ")
}

/// The hard limit `name` (nofile, nproc) of the process serving the engine's local socket `socket`, from its
/// `/proc/PID/limits`; `None` when that cannot be told (a remote engine, another pid namespace, unreadable).
pub fn engine_hard_limit(socket: &Path, name: &str) -> Option<i64> {
    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    // SO_PEERCRED: the pid of the process that listens, as this pid namespace sees it (none: another namespace's).
    let pid = rustix::net::sockopt::socket_peercred(&stream).ok()?.pid.as_raw_nonzero().get();
    hard_limit(&std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?, name)
}

/// The hard limit `name` in a `/proc/PID/limits` text ("Max open files  20000  20000  files"); "unlimited" is -1.
fn hard_limit(limits: &str, name: &str) -> Option<i64> {
    let row = match name {
        "nofile" => "Max open files",
        "nproc" => "Max processes",
        _ => return None,
    };
    let line = limits.lines().find(|l| l.starts_with(row))?;
    let hard = line[row.len()..].split_whitespace().nth(1)?;
    if hard == "unlimited" {
        return Some(-1);
    }
    hard.parse().ok()
}

/// Why the run cannot be retried with limits it may set: the engine's words, and what to pass.
#[derive(Debug)]
pub struct Refused {
    pub engine_said: String,
    /// The engine is not on a local socket (nothing here can tell what its host allows).
    pub remote: bool,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let documented: Vec<Ulimit> = fallback(&[], &|_| None);
        if self.remote {
            write!(
                f,
                "the engine may not raise resource limits on its host ({}): pass {} (or `ulimits:` in the profile), \
                 no higher than the engine's own hard limits",
                self.engine_said.trim(),
                as_flags(&documented)
            )
        } else {
            write!(
                f,
                "the engine may not raise resource limits this high ({}): pass lower --ulimit values, no higher \
                 than the engine's own hard limits (`prlimit --pid ENGINE_PID` shows them)",
                self.engine_said.trim()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_refusal_is_recognised() {
        assert!(is_refusal(
            "OCI runtime error: runc: runc create failed: unable to start container process: error during container \
             init: error setting rlimit type 7: operation not permitted (HTTP 500)"
        ));
        assert!(is_refusal("crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied"));
        assert!(!is_refusal("no such image"));
        assert!(!is_refusal("error setting rlimit type 7: invalid argument"));
    }

    #[test]
    fn the_retry_sets_what_the_run_does_not_at_most_the_engines_hard_limit() {
        let limit = |name: &str, v: i64| Ulimit { name: name.into(), soft: v, hard: v };
        assert_eq!(fallback(&[], &|_| None), [limit("nofile", 4096), limit("nproc", 4096)]);
        assert_eq!(as_flags(&fallback(&[], &|_| None)), "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096");
        let low = |name: &str| (name == "nofile").then_some(1024);
        assert_eq!(fallback(&[], &low), [limit("nofile", 1024), limit("nproc", 4096)]);
        assert_eq!(fallback(&[], &|_| Some(-1)), [limit("nofile", 4096), limit("nproc", 4096)], "unlimited");
        assert_eq!(fallback(&[limit("nofile", 2048)], &|_| None), [limit("nproc", 4096)]);
        assert!(fallback(&[limit("nofile", 2048), limit("nproc", 100)], &|_| None).is_empty());
    }

    #[test]
    fn proc_limits_are_read() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             96362                96362                processes \n\
                    Max open files            1024                 20000                files     \n\
                    Max locked memory         unlimited            unlimited            bytes     \n";
        assert_eq!(hard_limit(text, "nofile"), Some(20000));
        assert_eq!(hard_limit(text, "nproc"), Some(96362));
        assert_eq!(hard_limit("Max open files  unlimited  unlimited  files", "nofile"), Some(-1));
        assert_eq!(hard_limit(text, "core"), None);
        // This process's own, through its socket peer: a listener here is this very process.
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let ours = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap().1;
        let expected = if ours == nix::sys::resource::RLIM_INFINITY { -1 } else { ours as i64 };
        assert_eq!(engine_hard_limit(&socket, "nofile"), Some(expected));
    }

    #[test]
    fn a_refusal_says_what_to_pass() {
        let remote =
            Refused { engine_said: "error setting rlimit type 7: operation not permitted".into(), remote: true };
        assert_eq!(
            remote.to_string(),
            "the engine may not raise resource limits on its host (error setting rlimit type 7: operation not \
             permitted): pass --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 (or `ulimits:` in the profile), no \
             higher than the engine's own hard limits"
        );
    }
}
