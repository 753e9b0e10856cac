//! sidecar-ipc integration tests: the real binary on a temporary IPC folder, its two halves talking to each other,
//! fake peers written here, and a fake OpenAI-compatible server on 127.0.0.1:0.

mod example;
mod folders;
mod hostile;
mod openai;
mod prompt;
mod run;
mod server;
mod support;
