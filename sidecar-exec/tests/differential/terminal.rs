//! The terminal column's side of a case: `bash -c LINE` leading a session on a pty the harness opens (its
//! controlling terminal, and its stdin, stdout and stderr), of the same size and `TERM` natively and forwarded; the
//! screen read from the master, one stream, and keys typed there.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::harness::{Capturing, Case, End, Input, Running, Side, KEPT, STOP_BOUND};

/// The terminal's size: not the 24 × 80 a pty nobody sized is taken for, so a size that does not cross shows.
pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;
/// The terminal's `TERM`, on both sides (the test's own may be anything, or unset under CI).
pub const TERM: &str = "xterm-256color";

/// The key a terminal sends `signal` for (the line discipline's defaults: VINTR, VQUIT, VSUSP), if a key sends it.
/// Natively the local line discipline turns it into the signal for the foreground group; forwarded the client is
/// raw and the key crosses as a byte to the remote terminal's line discipline, which is what the column compares.
pub fn key_of(signal: Signal) -> Option<&'static [u8]> {
    match signal {
        Signal::SIGINT => Some(b"\x03"),
        Signal::SIGQUIT => Some(b"\x1c"),
        Signal::SIGTSTP => Some(b"\x1a"),
        _ => None,
    }
}

/// Starts `case` on a new terminal, its pty read and written on `runtime`.
pub fn start(case: &Case, side: &Side, dir: &Path, gate: &Arc<File>, runtime: &tokio::runtime::Handle) -> Running {
    assert!(matches!(case.stdin, Input::Null), "{}: a terminal case's stdin is the terminal", case.name);
    let entered = runtime.enter();
    let pty = process_group::open_pty(ROWS, COLS).expect("a pty pair");
    let mut command = tokio::process::Command::new("bash");
    command.arg("-c").arg(case.line).env_clear().envs(side.env.iter().cloned()).env("TERM", TERM).current_dir(dir);
    // The slave moves into the spawn: once the case's processes have closed it, the master reads EIO.
    let mut leader = process_group::spawn_pty_leader(command, pty.slave).expect("bash on the case's terminal");
    let group = Pid::from_raw(leader.pgid().get());
    let (mut screen, mut keyboard) = pty.master.into_split();
    let end = Arc::new(End::default());
    let waiter = {
        let end = end.clone();
        runtime.spawn(async move { end.set(leader.wait().await.unwrap()) })
    };
    let ack = case.ack_lines.then(|| gate.clone());
    let shown = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let shown = shown.clone();
        runtime.spawn(async move {
            let mut capturing = Capturing::default();
            let mut buffer = vec![0; 64 * 1024];
            // EIO is how a pty's master says every slave descriptor is closed (never a zero read on Linux).
            while let Ok(read @ 1..) = screen.read(&mut buffer).await {
                let chunk = &buffer[..read];
                let mut shown = shown.lock().unwrap();
                let room = KEPT.saturating_sub(shown.len());
                shown.extend_from_slice(&chunk[..room.min(read)]);
                drop(shown);
                capturing.add(chunk, ack.as_deref());
            }
            capturing.done()
        })
    };
    let (keys, mut typed) = tokio::sync::mpsc::unbounded_channel::<&'static [u8]>();
    runtime.spawn(async move {
        while let Some(key) = typed.recv().await {
            // A case that ended has no terminal to type on: what it was sent no longer matters.
            if keyboard.write_all(key).await.is_err() {
                break;
            }
        }
    });
    drop(entered);
    let runtime = runtime.clone();
    let output = move || {
        runtime.block_on(waiter).unwrap();
        // The leftovers are swept before this: nothing of the case holds the slave any more.
        let screen = runtime.block_on(async { tokio::time::timeout(STOP_BOUND, reader).await });
        (screen.expect("the screen ends once the case's processes are gone").unwrap(), None)
    };
    let typist = move |key: &'static [u8]| {
        let _ = keys.send(key);
    };
    Running { group, end, keys: Some(Box::new(typist)), screen: Some(shown), output: Box::new(output) }
}
