//! The exec-server binary: flags, logging, the health probe, signals; everything else is in the library.

use std::process::ExitCode;

use clap::Parser;
use exec_server::config::{normalize_single_dash, Config};
use process_group::{next_stop_signal, StopSignals};

mod startup;

fn main() -> ExitCode {
    // Before anything secret is in memory: the commands run as this user, and must not read it (see `privacy`).
    let hidden = exec_server::privacy::hide_from_commands();
    // First: given the token in its environment, the server re-executes itself without it (see `token`).
    let from_env = match exec_server::token::take_from_env() {
        Ok(from_env) => from_env,
        Err(err) => return fail(&format!("cannot read the token handed over by the server's own re-exec: {err}")),
    };
    let mut config = Config::parse_from(normalize_single_dash(std::env::args_os()));
    config.token = from_env.token;
    if config.healthcheck {
        return healthcheck(&config);
    }
    init_logging(&config);
    if let Err(err) = hidden {
        tracing::warn!("cannot make the server undumpable ({err}): commands of its user can read its memory and files");
    }
    if let Some(err) = from_env.still_shown {
        tracing::warn!(
            "EXEC_SERVER_TOKEN stays readable in /proc/{}/environ ({err}); prefer --token-file",
            std::process::id()
        );
    }
    // Connections and commands share the open-file limit: raise it to what they need, no further, since commands
    // inherit it (see `http::server::fds`).
    let fds = exec_server::http::server::fds::ConnectionBudget::nofile_wanted(
        config.max_connections.map(|n| n as usize),
        config.max_commands(),
    );
    match exec_server::http::server::fds::raise_nofile_limit(fds) {
        Ok((before, after)) if before < after => tracing::debug!(before, after, "open-file limit raised"),
        Ok(_) => {}
        Err(err) => tracing::warn!("cannot raise the open-file limit to {fds}: {err}"),
    }
    if let Err(err) = exec_server::engine::become_subreaper() {
        tracing::warn!("cannot become a child subreaper ({err}); orphaned grandchildren will be reaped by PID 1");
    }
    startup::warn_if_workspace_unwritable(&config.cwd);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&format!("cannot start the async runtime: {err}")),
    };
    let result = runtime.block_on(async {
        // Every child of this process is a command leader spawned by the engine, so adopted orphans (escapees that
        // exited by themselves) can be reaped without taking a leader from tokio: see `process_group::reaper`.
        tokio::spawn(exec_server::engine::reap_adopted_forever());
        let shutdown = shutdown_signal();
        let listener = if config.serves_http() {
            let addr = format!("{}:{}", config.host, config.port.unwrap_or(exec_server::config::DEFAULT_PORT));
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|err| std::io::Error::other(format!("cannot listen on {addr}: {err}")))?;
            Some(listener)
        } else {
            None
        };
        let _port_file = startup::PortFile::publish(config.port_file.as_deref(), listener.as_ref());
        exec_server::run(config, listener, shutdown).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err.to_string()),
    }
}

/// Text for people (colours on a terminal), or JSON lines for log pipelines: one object per event, its fields at
/// the top level, and the request's span (`request_id`, `traceparent`) under `span`.
fn init_logging(config: &Config) {
    use exec_server::config::LogFormat;
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt().with_max_level(config.log).with_writer(std::io::stderr).with_target(false);
    match config.log_format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("exec-server: {message}");
    ExitCode::FAILURE
}

/// SIGTERM, SIGINT or SIGHUP ([`StopSignals`]): each stops the server the same way, so that no command outlives it
/// and every client gets its ending. The handlers are installed at once (a signal that arrives before the returned
/// future is first polled is kept); without them, the server can only be killed.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let mut signals = StopSignals::install().ok();
    async move {
        next_stop_signal(signals.as_mut()).await;
    }
}

/// The contract's probe: GET /health on the local port (or, for a server that listens only on UNIX sockets, on the
/// first of them), 3 s in all, exit 0 on 200.
fn healthcheck(config: &Config) -> ExitCode {
    use std::time::Duration;
    let timeout = Duration::from_secs(3);
    let socket = (!config.serves_http()).then(|| config.listen.first()).flatten();
    let (target, result) = match socket {
        Some(listen) => {
            let path = listen.strip_prefix("unix:").unwrap_or(listen);
            let probe = std::os::unix::net::UnixStream::connect(path).and_then(|stream| {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))?;
                probe(stream)
            });
            (format!("unix:{path} /health"), probe)
        }
        None => {
            let port = startup::probe_port(config);
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let probe = std::net::TcpStream::connect_timeout(&addr, timeout).and_then(|stream| {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))?;
                probe(stream)
            });
            (format!("http://127.0.0.1:{port}/health"), probe)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => fail(&format!("unhealthy: GET {target} did not answer 200")),
        Err(err) => fail(&format!("unhealthy: GET {target} failed: {err}")),
    }
}

fn probe(mut stream: impl std::io::Read + std::io::Write) -> std::io::Result<bool> {
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    Ok(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200"))
}
