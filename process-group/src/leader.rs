//! A command's leader: spawned at the head of its own process group, owned (and reaped) by tokio.

use std::process::ExitStatus;

use tokio::process::{Child, Command};

use crate::reaper::{self, Registration};
use crate::Pgid;

/// A running command's first process. It leads its own process group, so the whole tree it starts (short of
/// `setsid`) can be signalled at once; tokio reaps it, and the reaper (see [`crate::reaper`]) knows not to.
#[derive(Debug)]
pub struct Leader {
    child: Child,
    pgid: Pgid,
    _owned: Registration,
}

/// Spawns `command` as the leader of a new process group (`process_group(0)` is set here), recorded as owned by
/// tokio in the same step.
pub fn spawn_leader(command: &mut Command) -> std::io::Result<Leader> {
    command.process_group(0);
    let (child, owned) = reaper::register(|| command.spawn())?;
    let pgid = child
        .id()
        .and_then(Pgid::led_by)
        .ok_or_else(|| std::io::Error::other("a command spawned a moment ago has no usable pid"))?;
    Ok(Leader { child, pgid, _owned: owned })
}

impl Leader {
    /// A leader spawned and recorded by another constructor of this crate (see `pty_leader`).
    pub(crate) fn owned(child: Child, pgid: Pgid, owned: Registration) -> Self {
        Leader { child, pgid, _owned: owned }
    }

    /// The group the leader heads (its own pid).
    pub fn pgid(&self) -> Pgid {
        self.pgid
    }

    /// The tokio child, for its pipes.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the leader to exit and reaps it. Cancel-safe, like [`Child::wait`].
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }
}
