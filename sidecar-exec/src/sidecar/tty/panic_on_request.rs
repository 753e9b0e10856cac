//! A panic a test can cause while the terminal is raw, in debug builds only: how tests/tty.rs proves the restore on
//! a panic ([`super::raw_mode`]).
//!
//! *Why a switch, and why only in debug builds:* no path of a correct client panics, so a test of the restore on a
//! panic needs one made for it. `SIDECAR_DEBUG_PANIC_ON_USR1` (`main`: on the call's own task; `thread`: on a thread
//! of its own, as the stdin and SSE readers are) arms it, and SIGUSR1 then panics. It is compiled only under
//! `debug_assertions`: a release build, what users run, has no such variable and keeps SIGUSR1's default, so nobody
//! can hit it by accident; CI's tests run the debug build.

/// Where the panic comes: on the call's task, or on a thread of the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub enum PanicPlace {
    Main,
    Thread,
}

/// The armed switch: SIGUSR1 is caught from the moment this exists (before the request goes out).
pub struct Armed(Option<(PanicPlace, tokio::signal::unix::Signal)>);

/// Arms the switch when the variable asks for it (debug builds only).
pub fn arm() -> Armed {
    #[cfg(debug_assertions)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let place = match std::env::var("SIDECAR_DEBUG_PANIC_ON_USR1").as_deref() {
            Ok("main") => Some(PanicPlace::Main),
            Ok("thread") => Some(PanicPlace::Thread),
            _ => None,
        };
        if let (Some(place), Ok(usr1)) = (place, signal(SignalKind::user_defined1())) {
            return Armed(Some((place, usr1)));
        }
    }
    Armed(None)
}

impl Armed {
    /// Panics where it was armed to once SIGUSR1 comes; never ends otherwise.
    pub async fn fire(self) {
        let Armed(Some((place, mut usr1))) = self else { return std::future::pending().await };
        usr1.recv().await;
        match place {
            PanicPlace::Main => panic!("SIDECAR_DEBUG_PANIC_ON_USR1=main: a panic on the call's task, as a test asked"),
            PanicPlace::Thread => {
                let _ = std::thread::spawn(|| {
                    panic!("SIDECAR_DEBUG_PANIC_ON_USR1=thread: a panic on a thread of the client's, as a test asked")
                });
            }
        }
        std::future::pending().await
    }
}
