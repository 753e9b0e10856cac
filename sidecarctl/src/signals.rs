//! What Ctrl-C, SIGTERM and SIGHUP ([`StopSignals`]) mean to `up`, counted for the life of the process (the handlers
//! stay installed, so no signal is ever swallowed):
//!
//! 1. the first stops the run: every engine call in progress is abandoned (a pull, the gate, the attached agent)
//!    and the teardown starts, stopping containers with the grace (SIGTERM, `--stop-grace`, SIGKILL);
//! 2. a second one cuts the grace: the containers are killed and removed at once;
//! 3. a third one abandons the teardown, which then says what is left and how to remove it.
//!
//! The exit code is the first signal's (128 + N, as a shell reports it).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use process_group::StopSignals;
use tokio_util::sync::CancellationToken;

/// The three levels, each cancelled by one more signal.
#[derive(Clone, Debug)]
pub struct StopLevels {
    /// The first signal: stop the run and tear it down.
    pub stop: CancellationToken,
    /// The second: no grace.
    pub hurry: CancellationToken,
    /// The third: leave the teardown.
    pub abandon: CancellationToken,
    first: Arc<AtomicI32>,
}

impl StopLevels {
    /// Levels that only [`StopLevels::signal`] cancels (no handlers: the process could not install them, or a test).
    pub fn new() -> StopLevels {
        StopLevels {
            stop: CancellationToken::new(),
            hurry: CancellationToken::new(),
            abandon: CancellationToken::new(),
            first: Arc::new(AtomicI32::new(0)),
        }
    }

    /// Installs the handlers and counts every stop signal from now on.
    pub fn install() -> StopLevels {
        let levels = StopLevels::new();
        if let Ok(mut signals) = StopSignals::install() {
            let counted = levels.clone();
            tokio::spawn(async move {
                loop {
                    counted.signal(signals.recv().await as i32);
                }
            });
        }
        levels
    }

    /// One more signal, number `signal`.
    pub fn signal(&self, signal: i32) {
        let _ = self.first.compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed);
        if !self.stop.is_cancelled() {
            self.stop.cancel();
        } else if !self.hurry.is_cancelled() {
            self.hurry.cancel();
        } else {
            self.abandon.cancel();
        }
    }

    /// The exit code for a run a signal stopped: 128 + the first signal (SIGINT's 130 when none was counted).
    pub fn code(&self) -> i32 {
        match self.first.load(Ordering::Relaxed) {
            0 => 128 + nix::sys::signal::Signal::SIGINT as i32,
            signal => 128 + signal,
        }
    }
}

impl Default for StopLevels {
    fn default() -> Self {
        StopLevels::new()
    }
}

/// `work`, unless the run is stopped first: then `None`, and `work` is dropped (an engine request in flight is
/// abandoned: a pull stops streaming, and the teardown removes whatever the run created by its label).
pub async fn unless_stopped<T>(stop: &CancellationToken, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        done = work => Some(done),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nix::sys::signal::{raise, Signal};

    use super::*;

    /// Each signal goes one level further, however many arrive: the handlers do not end with the first one.
    #[tokio::test]
    async fn every_signal_is_counted_and_the_first_names_the_exit_code() {
        let levels = StopLevels::install();
        let wait = |token: &CancellationToken| {
            let token = token.clone();
            async move { tokio::time::timeout(Duration::from_secs(60), token.cancelled()).await.unwrap() }
        };
        raise(Signal::SIGINT).unwrap();
        wait(&levels.stop).await;
        assert!(!levels.hurry.is_cancelled());
        raise(Signal::SIGTERM).unwrap();
        wait(&levels.hurry).await;
        assert!(!levels.abandon.is_cancelled());
        raise(Signal::SIGHUP).unwrap();
        wait(&levels.abandon).await;
        assert_eq!(levels.code(), 130);
    }

    #[tokio::test]
    async fn a_stopped_run_abandons_the_work_in_progress() {
        let levels = StopLevels::new();
        let never = std::future::pending::<()>();
        let stopper = levels.clone();
        tokio::spawn(async move { stopper.signal(Signal::SIGTERM as i32) });
        assert_eq!(unless_stopped(&levels.stop, never).await, None);
        assert_eq!(unless_stopped(&levels.stop, async { 1 }).await, None, "stopped first: nothing new starts");
        assert_eq!(unless_stopped(&CancellationToken::new(), async { 1 }).await, Some(1));
        assert_eq!(levels.code(), 143);
    }
}
