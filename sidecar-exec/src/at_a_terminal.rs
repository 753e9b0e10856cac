//! Whether a call runs on a terminal at the other end, for both clients: the switch (`SIDECAR_TTY`, `SSH_TTY`) when
//! set, else whether stdin and stdout both are terminals, as a person at a prompt has them. stderr does not count
//! (`cmd 2>log` at a terminal is still interactive, as with `ssh`); a pipe on stdin or stdout means a script, which
//! must get the plain byte streams.

use std::io::IsTerminal;

/// `switch` when set, else whether stdin and stdout are both terminals.
pub fn wanted(switch: Option<bool>) -> bool {
    switch.unwrap_or_else(|| std::io::stdin().is_terminal() && std::io::stdout().is_terminal())
}
