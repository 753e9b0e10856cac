//! exec-server's checks of a `POST /exec` body (`exec_server::http::check_request`): for any bytes, a refusal is a
//! 400 (with `too_many_env_vars` exactly when `env` names more than the bound), never a panic; a body it takes is a
//! JSON object serde's derived reader reads the same way, with a program, the `run_id` a `tty` or `stdin_stream`
//! needs, and a terminal type that is one; its environment is a plain model's (the server's variables in their
//! order less those the request names, then the request's, then `TERM` for a terminal and the trace context), with
//! each name once; and the request's terminal modes, laid over a real pty's, read back as they were asked.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::OnceLock;

use exec_server::http::{check_request, MAX_TERM_BYTES};
use protocol::{ErrorCode, ExecRequest};

/// The server's environment the request is laid over: a `TERM` and a `TRACEPARENT` of its own among them.
const BASE: [(&str, &str); 5] =
    [("PATH", "/usr/bin:/bin"), ("TERM", "dumb"), ("HOME", "/root"), ("TRACEPARENT", "server's"), ("LANG", "C")];
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

pub fn check(input: &[u8]) {
    let base: Vec<(OsString, OsString)> = BASE.iter().map(|(name, value)| (name.into(), value.into())).collect();
    // Half the inputs come with a trace context, by their length.
    let traceparent = (input.len() % 2 == 1).then_some(TRACEPARENT);
    let checked = match check_request(input, &base, traceparent) {
        Ok(checked) => checked,
        Err(refusal) => {
            assert_eq!(refusal.status, 400, "{}", refusal.message);
            assert!(!refusal.message.is_empty());
            let too_many = serde_json::from_slice::<ExecRequest>(input)
                .is_ok_and(|request| request.env.is_some_and(|env| env.len() > protocol::MAX_ENV_VARS));
            assert_eq!(refusal.code == Some(ErrorCode::TooManyEnvVars), too_many, "{}", refusal.message);
            return;
        }
    };
    let request = &checked.request;
    assert!(input.trim_ascii_start().starts_with(b"{"), "took a body that is no JSON object");
    assert_eq!(serde_json::from_slice::<ExecRequest>(input).ok().as_ref(), Some(request), "read otherwise than serde");
    assert!(request.cmd.first().is_some_and(|program| !program.is_empty()), "no program: {:?}", request.cmd);
    assert!(request.cmd.iter().all(|arg| !arg.contains('\0')));
    if request.tty.is_some() || request.stdin_stream {
        assert!(request.run_id.is_some(), "a tty or streamed stdin without a run_id");
    }
    let env = request.env.clone().unwrap_or_default();
    assert!(env.len() <= protocol::MAX_ENV_VARS);
    assert_eq!(checked.env, model(&env, request, traceparent), "not the model's environment");
    let mut names: Vec<_> = checked.env.iter().map(|(name, _)| name).collect();
    names.sort();
    assert!(names.windows(2).all(|pair| pair[0] != pair[1]), "a variable twice: {:?}", checked.env);
    for (name, value) in &checked.env {
        assert!(!name.is_empty() && !name.as_encoded_bytes().contains(&b'=') && !name.as_encoded_bytes().contains(&0));
        assert!(!value.as_encoded_bytes().contains(&0));
    }
    if let Some(term) = request.tty.as_ref().and_then(|tty| tty.term.as_deref()) {
        assert!((1..=MAX_TERM_BYTES).contains(&term.len()) && term.bytes().all(|b| b.is_ascii_graphic()), "{term:?}");
    }
    if let Some(modes) = request.tty.as_ref().and_then(|tty| tty.modes.as_ref()) {
        laid_over_a_pty(modes);
    }
}

/// The environment the rules say: the server's less what the request names, the request's in name order, then
/// `TERM` for a terminal (the request's, else the environment's, else the default) and the trace context.
fn model(
    env: &BTreeMap<String, String>,
    request: &ExecRequest,
    traceparent: Option<&str>,
) -> Vec<(OsString, OsString)> {
    let mut model: Vec<(String, String)> = BASE
        .iter()
        .filter(|(name, _)| !env.contains_key(*name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .chain(env.iter().map(|(name, value)| (name.clone(), value.clone())))
        .collect();
    if let Some(tty) = &request.tty {
        let term = tty.term.clone().unwrap_or_else(|| {
            model.iter().find(|(name, _)| name == "TERM").map_or("xterm-256color".to_owned(), |(_, term)| term.clone())
        });
        model.retain(|(name, _)| name != "TERM");
        model.push(("TERM".into(), term));
    }
    if let Some(traceparent) = traceparent {
        model.retain(|(name, _)| name != "TRACEPARENT");
        model.push(("TRACEPARENT".into(), traceparent.into()));
    }
    model.into_iter().map(|(name, value)| (name.into(), value.into())).collect()
}

/// A real pty's modes, read once.
fn pty_modes() -> &'static rustix::termios::Termios {
    static MODES: OnceLock<rustix::termios::Termios> = OnceLock::new();
    MODES.get_or_init(|| {
        use rustix::pty::{openpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("a pty to lay modes over");
        rustix::termios::tcgetattr(&master).expect("the pty's modes")
    })
}

/// Laid over a pty's modes, the named characters and flags read back as asked (the character size as the one flag
/// of `cs7` and `cs8` that is on, when one is).
fn laid_over_a_pty(modes: &protocol::TerminalModes) {
    let mut termios = pty_modes().clone();
    let _ = modes.apply(&mut termios);
    let read = protocol::TerminalModes::of(&termios);
    for (name, byte) in &modes.chars {
        assert_eq!(read.chars.get(name), Some(&byte.filter(|&b| b != 0)), "chars.{name}");
    }
    for (name, on) in &modes.flags {
        if name != "cs7" && name != "cs8" {
            assert_eq!(read.flags.get(name), Some(on), "flags.{name}");
        } else if *on {
            assert_eq!(read.flags.get(name), Some(&true), "flags.{name}");
        }
    }
}
