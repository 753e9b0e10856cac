//! The threads that parse and check large request bodies, away from the runtime's workers and below their priority.
//!
//! *Decision:* threads of their own, not tokio's blocking pool. Parsing up to 1 MiB of JSON is CPU work, and the
//! blocking pool would run as many at once as requests came (up to 512 threads), each as entitled to a CPU as the
//! workers that answer `/health`; measured with 8 clients sending 1 MiB bodies on 2 busy cores, `/health` p99 was
//! then 28 ms. These are as many as the CPUs (so parsing cannot take more than the machine has), and niced by
//! [`NICENESS`] (so the kernel runs a worker that wakes first): the probe's p99 stays within a few ms (BENCHMARKS.md,
//! "A few large requests"). When no such thread can be started, the work goes to the blocking pool.
//!
//! The queue in front of them is bounded ([`QUEUE_PER_THREAD`] bodies a thread): a flood of large bodies gets 503 with
//! `Retry-After` instead of holding every body it sent (320 bodies of 1 MiB took the server from 23 to 295 MB, and a
//! small request behind them waited 39 s). A body whose client left before its turn is dropped unparsed.

use std::num::NonZero;
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc, Mutex, OnceLock};

/// How much nicer than the server the threads are (a nice value is per thread on Linux).
const NICENESS: i32 = 10;

/// How many bodies may wait for each preparer thread.
pub const QUEUE_PER_THREAD: usize = 16;

type Task = Box<dyn FnOnce() + Send>;

/// Why `work` gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unprepared {
    /// The queue is full: the request is refused with 503 and `Retry-After`.
    Busy,
    /// It panicked (a bug; the thread goes on).
    Panicked,
}

/// Runs `work` on a preparer thread and gives its result. A `work` whose caller is gone (the client left) before a
/// thread takes it is dropped without running.
pub async fn off_the_workers<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Unprepared> {
    let (done, result) = tokio::sync::oneshot::channel();
    let task: Task = Box::new(move || {
        if !done.is_closed() {
            let _ = done.send(work());
        }
    });
    match queue() {
        Some(queue) => match queue.try_send(task) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Full(_)) => return Err(Unprepared::Busy),
            // Only when every thread is gone, which no task can cause (each is caught below).
            Err(mpsc::TrySendError::Disconnected(task)) => drop(tokio::task::spawn_blocking(task)),
        },
        None => drop(tokio::task::spawn_blocking(task)),
    }
    result.await.map_err(|_| Unprepared::Panicked)
}

/// The threads' queue, started on first use; `None` when not one thread could be started.
fn queue() -> Option<&'static mpsc::SyncSender<Task>> {
    static QUEUE: OnceLock<Option<mpsc::SyncSender<Task>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map_or(2, NonZero::get);
            let (sender, receiver) = mpsc::sync_channel::<Task>(threads * QUEUE_PER_THREAD);
            let receiver = Arc::new(Mutex::new(receiver));
            let started = (0..threads)
                .filter(|index| {
                    let receiver = receiver.clone();
                    let thread = std::thread::Builder::new().name(format!("exec-prepare-{index}"));
                    thread.spawn(move || serve(&receiver)).is_ok()
                })
                .count();
            (started > 0).then_some(sender)
        })
        .as_ref()
}

fn serve(receiver: &Mutex<mpsc::Receiver<Task>>) {
    let tid = rustix::thread::gettid();
    if let Err(err) = rustix::process::setpriority_process(Some(tid), NICENESS) {
        tracing::debug!(%err, "a request preparer thread keeps the server's priority");
    }
    loop {
        let task = receiver.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
        let Ok(task) = task else { return };
        // A panic is the task's (its result is then missing); the thread goes on serving.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(task));
    }
}
