//! Text from the other side (a sidecar, an SSH host) shown on our own `sidecar-exec:` / `ssh-exec:` line (error
//! bodies, `error` fields and frames, a redirect's Location, ssh's last words): made safe for a terminal and short
//! enough for one line.

/// How much server text one message shows, in bytes after escaping; the rest becomes "…". An error worth reading
/// fits in far less; a server that sends megabytes must not flood the agent's context or terminal.
pub const MAX_SHOWN_BYTES: usize = 1024;

/// `text` with every control character escaped (`\n`, `\r`, `\t`, `\x1b`, `\u{9b}`, …: no escape sequence can reach
/// the terminal, and the message stays on one line), as are the characters that reorder text on screen (bidi
/// controls), and cut after [`MAX_SHOWN_BYTES`] with "…".
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_SHOWN_BYTES) + 8);
    for c in text.chars() {
        let start = out.len();
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || is_bidi_control(c) => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
        if out.len() > MAX_SHOWN_BYTES {
            out.truncate(start);
            out.push('…');
            break;
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_cuts() {
        assert_eq!(terminal_safe("plain é"), "plain é");
        assert_eq!(terminal_safe("a\x1b[31mb\nc\u{9b}d\u{202e}"), "a\\x1b[31mb\\nc\\u{9b}d\\u{202e}");
        let long = terminal_safe(&"é".repeat(2000));
        assert!(long.ends_with('…') && long.len() <= MAX_SHOWN_BYTES + '…'.len_utf8(), "{}", long.len());
        assert_eq!(terminal_safe(&"x".repeat(MAX_SHOWN_BYTES)), "x".repeat(MAX_SHOWN_BYTES));
    }
}
