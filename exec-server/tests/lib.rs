//! exec-server integration tests: the real server on 127.0.0.1:0 (in-process or the real binary), real processes.

mod api;
mod cli;
mod commands;
mod connections;
mod daemons;
mod ipc;
mod logs;
mod metrics;
mod output;
mod privacy;
mod process;
mod requests;
mod runs;
mod signals;
mod socket;
mod stdin;
mod support;
mod trace;
mod tty;
