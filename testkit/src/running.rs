//! A binary running in the background for a test: started, waited for until its stderr prints a ready line, its log
//! kept (read on a thread, so it never blocks on a full pipe) for later waits on a log line, stopped by a signal it
//! catches, and killed and reaped when the test drops it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

/// The hang guard of every wait here (never a timing assertion).
const HANG: Duration = Duration::from_secs(30);

/// A process started by [`Running::start`].
pub struct Running {
    pub child: Child,
    log: Arc<Log>,
}

#[derive(Default)]
struct Log {
    /// The lines of stderr so far, and whether it has ended.
    lines: Mutex<(Vec<String>, bool)>,
    changed: Condvar,
}

impl Running {
    /// Spawns `command` with its stderr taken over, and waits until a line of it is one `ready` accepts (returned
    /// too: a listening line carries the port). Panics with the log if the process ends first.
    pub fn start(mut command: Command, ready: impl Fn(&str) -> bool) -> (Running, String) {
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::new(Log::default());
        let writer = log.clone();
        std::thread::spawn(move || {
            for line in stderr.split(b'\n') {
                let Ok(line) = line else { break };
                writer.lines.lock().unwrap().0.push(String::from_utf8_lossy(&line).into_owned());
                writer.changed.notify_all();
            }
            writer.lines.lock().unwrap().1 = true;
            writer.changed.notify_all();
        });
        let running = Running { child, log };
        let line = running.wait_for_line("its ready line", ready);
        (running, line)
    }

    /// The first line of stderr, printed already or later, that `matches` accepts: an event to wait on.
    pub fn wait_for_line(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + HANG;
        let mut lines = self.log.lines.lock().unwrap();
        loop {
            if let Some(line) = lines.0.iter().find(|line| matches(line)) {
                return line.clone();
            }
            assert!(!lines.1, "{what}: stderr ended first:\n{}", lines.0.join("\n"));
            let left = deadline.checked_duration_since(Instant::now());
            let Some(left) = left.filter(|left| !left.is_zero()) else {
                panic!("{what}: not printed within {HANG:?}:\n{}", lines.0.join("\n"));
            };
            lines = self.log.changed.wait_timeout(lines, left).unwrap().0;
        }
    }

    /// Every line of stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lines.lock().unwrap().0.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for it to exit by itself (it was told to), for at most `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit within {within:?}:\n{}", self.log().join("\n"));
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` until the process exits, for at most `within`; returns how it exited and how long that took
    /// from the first signal. It waits first until the process catches the signal (before that, the default action
    /// would end it and prove nothing), and sends again every half second because a signal that comes in the instant
    /// tokio installs its handler can go unseen; a process that does not act on the signal still never exits.
    pub fn stop_with(&mut self, signal: Signal, within: Duration) -> (ExitStatus, Duration) {
        let pid = i32::try_from(self.pid()).unwrap();
        let deadline = Instant::now() + within;
        while !catches(self.pid(), signal) {
            assert!(Instant::now() < deadline, "the process never handled {signal}");
            std::thread::sleep(Duration::from_millis(5));
        }
        let started = Instant::now();
        loop {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
            let again = Instant::now() + Duration::from_millis(500);
            while Instant::now() < again {
                if let Some(status) = self.child.try_wait().unwrap() {
                    return (status, started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(Instant::now() < deadline, "no exit on {signal} within {within:?}:\n{}", self.log().join("\n"));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` has a handler for `signal` (its `SigCgt` mask in `/proc/<pid>/status`).
pub fn catches(pid: u32, signal: Signal) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let mask = status.lines().find_map(|line| line.strip_prefix("SigCgt:")).unwrap_or("0");
    u64::from_str_radix(mask.trim(), 16).is_ok_and(|mask| mask & (1 << (signal as i32 - 1)) != 0)
}
