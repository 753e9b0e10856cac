//! The agent, attached to our terminal: its stdout to ours, its stderr to ours, our stdin to it (with a TTY when
//! ours is one, or with `-i`), and its exit code as ours. Its TTY has our window's size, from its start and again
//! at every SIGWINCH. A stop request (Ctrl-C, SIGTERM) stops the agent with its stop signal and a grace period,
//! saying so at once (an agent that ignores SIGTERM is otherwise the grace's silence), then reports how it ended
//! and how long the stop took.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, ResizeContainerTTYOptions, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::engine::{ContainerEngine, EngineError};
use crate::progress::Progress;
use crate::signals::{unless_stopped, StopLevels};

/// How the agent ended.
#[derive(Debug, PartialEq, Eq)]
pub enum AgentEnd {
    /// It exited by itself with this code.
    Exited(i64),
    /// We stopped it (a signal to us): its exit code after the stop, and when the stop began.
    Stopped { code: i64, since: Instant },
}

/// Puts our terminal in raw mode while the agent owns it (keys, Ctrl-C included, go to the agent's TTY), and
/// restores it on drop.
struct RawMode(Option<nix::sys::termios::Termios>);

impl RawMode {
    fn enter(tty: bool) -> RawMode {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        if !tty || !std::io::stdin().is_terminal() {
            return RawMode(None);
        }
        let stdin = std::io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else { return RawMode(None) };
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        let _ = tcsetattr(&stdin, SetArg::TCSANOW, &raw);
        RawMode(Some(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, saved);
        }
    }
}

/// Attaches to the created (not yet started) container `name`, starts it, and waits for its end.
pub async fn run_attached(
    engine: &ContainerEngine,
    name: &str,
    tty: bool,
    stdin: bool,
    grace: Duration,
    signals: &StopLevels,
    progress: &Progress,
) -> Result<AgentEnd, EngineError> {
    let docker = engine.docker();
    let options =
        AttachContainerOptionsBuilder::default().stream(true).stdout(true).stderr(true).stdin(stdin).logs(true).build();
    let attached = docker
        .attach_container(name, Some(options))
        .await
        .map_err(|error| EngineError::Api { what: format!("attaching to {name}"), error })?;
    let mut output = attached.output;
    let mut input = attached.input;
    let raw = RawMode::enter(tty);
    engine.start(name).await?;
    let window = tty.then(|| tokio::spawn(follow_window_size(engine.clone(), name.to_owned())));

    let pump_out = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut stderr = tokio::io::stderr();
        while let Some(Ok(chunk)) = output.next().await {
            let _ = match chunk {
                LogOutput::StdErr { message } => stderr.write_all(&message).await.and(stderr.flush().await),
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    stdout.write_all(&message).await.and(stdout.flush().await)
                }
                LogOutput::StdIn { .. } => Ok(()),
            };
        }
    });
    let pump_in = stdin.then(|| {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut input).await;
            let _ = input.shutdown().await;
        })
    });

    let end = tokio::select! {
        code = wait(engine, name) => AgentEnd::Exited(code?),
        _ = signals.stop.cancelled() => {
            let since = Instant::now();
            progress.step(&format!(
                "stopping the agent (Ctrl-C again to kill): SIGTERM, then SIGKILL after {}s",
                grace.as_secs()
            ));
            // A second signal cuts the grace: the agent is killed at once.
            if unless_stopped(&signals.hurry, engine.stop(name, grace)).await.transpose()?.is_none() {
                progress.step("killing the agent (SIGKILL)");
                engine.stop(name, Duration::ZERO).await?;
            }
            let code = wait(engine, name).await?;
            progress.step(&format!(
                "agent stopped after {:.1}s (exit code {code})",
                since.elapsed().as_secs_f64()
            ));
            AgentEnd::Stopped { code, since }
        }
    };
    // The output ends with the container; a bounded wait so that a stuck stream cannot hold the exit.
    let _ = tokio::time::timeout(Duration::from_secs(5), pump_out).await;
    if let Some(pump) = pump_in {
        pump.abort();
    }
    if let Some(window) = window {
        window.abort();
    }
    drop(raw);
    Ok(end)
}

/// Our terminal's window size (rows, columns), when stdout (or stdin) is a terminal.
pub fn window_size() -> Option<(u16, u16)> {
    [rustix::termios::tcgetwinsize(std::io::stdout()), rustix::termios::tcgetwinsize(std::io::stdin())]
        .into_iter()
        .flatten()
        .find(|size| size.ws_row > 0 && size.ws_col > 0)
        .map(|size| (size.ws_row, size.ws_col))
}

/// Gives the agent's TTY our window's size now and after every SIGWINCH, until aborted. A failed resize (the
/// container just ended) is not an error of the run: the next one, if any, tries again.
async fn follow_window_size(engine: ContainerEngine, name: String) {
    use tokio::signal::unix::{signal, SignalKind};
    // Installed before the first resize, so a change in between is not lost.
    let mut changes = signal(SignalKind::window_change()).ok();
    loop {
        if let Some((rows, cols)) = window_size() {
            let size = ResizeContainerTTYOptions { h: i32::from(rows), w: i32::from(cols) };
            let _ = engine.docker().resize_container_tty(&name, size).await;
        }
        let Some(changes) = changes.as_mut() else { return };
        if changes.recv().await.is_none() {
            return;
        }
    }
}

/// The container's exit code once it is not running.
async fn wait(engine: &ContainerEngine, name: &str) -> Result<i64, EngineError> {
    let options = WaitContainerOptionsBuilder::default().condition("not-running").build();
    let mut stream = engine.docker().wait_container(name, Some(options));
    match stream.next().await {
        Some(Ok(response)) => Ok(response.status_code),
        // bollard reports a non-zero exit as an error carrying the code.
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(error)) => Err(EngineError::Api { what: format!("waiting for {name}"), error }),
        None => Ok(engine.inspect(name).await?.state.and_then(|s| s.exit_code).unwrap_or(-1)),
    }
}
