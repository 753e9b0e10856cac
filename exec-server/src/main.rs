//! The exec-server binary: flags, logging, the health probe, signals; everything else is in the library.

use std::process::ExitCode;

use clap::Parser;
use exec_server::config::{normalize_single_dash, Config};

fn main() -> ExitCode {
    let mut config = Config::parse_from(normalize_single_dash(std::env::args_os()));
    config.token = std::env::var("EXEC_SERVER_TOKEN").ok().filter(|token| !token.is_empty());
    if config.healthcheck {
        return healthcheck(config.port.unwrap_or(exec_server::config::DEFAULT_PORT));
    }
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_max_level(config.log)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    // Connections and commands share the open-file limit: take all of it (see `http::fds`).
    match exec_server::http::fds::raise_nofile_limit() {
        Ok((before, after)) if before < after => tracing::debug!(before, after, "open-file limit raised"),
        Ok(_) => {}
        Err(err) => tracing::warn!("cannot raise the open-file limit to its hard limit: {err}"),
    }
    if let Err(err) = exec_server::engine::become_subreaper() {
        tracing::warn!("cannot become a child subreaper ({err}); orphaned grandchildren will be reaped by PID 1");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&format!("cannot start the async runtime: {err}")),
    };
    let result = runtime.block_on(async {
        let listener = if config.serves_http() {
            let addr = format!("{}:{}", config.host, config.port.unwrap_or(exec_server::config::DEFAULT_PORT));
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|err| std::io::Error::other(format!("cannot listen on {addr}: {err}")))?;
            Some(listener)
        } else {
            None
        };
        exec_server::run(config, listener, shutdown_signal()).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("exec-server: {message}");
    ExitCode::FAILURE
}

/// SIGTERM (container stop) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// The contract's probe: GET /health on the local port, 3 s in all, exit 0 on 200.
fn healthcheck(port: u16) -> ExitCode {
    use std::io::{Read, Write};
    use std::time::Duration;
    let probe = || -> std::io::Result<bool> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let timeout = Duration::from_secs(3);
        let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200"))
    };
    match probe() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => fail(&format!("unhealthy: GET http://127.0.0.1:{port}/health did not answer 200")),
        Err(err) => fail(&format!("unhealthy: GET http://127.0.0.1:{port}/health failed: {err}")),
    }
}
