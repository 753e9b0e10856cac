//! Quoting for a POSIX shell: how the wrappers name the client and how ssh-exec hands a command line to the host.

/// `text` as one word for `sh`: inside `'…'` every byte is literal (`$`, `;`, backquotes, newlines, `*`), so the
/// only character to treat is the single quote itself, which closes, is escaped, and reopens: `'\''`.
pub fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('\'');
    for c in text.chars() {
        if c == '\'' {
            quoted.push_str(r"'\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// The words quoted and joined by spaces: a command line for `sh`.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words.iter().map(|word| quote(word.as_ref())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("/opt/x"), "'/opt/x'");
        assert_eq!(quote("/it's"), r"'/it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(join(&["a b", "; rm -rf /", "x\ny"]), "'a b' '; rm -rf /' 'x\ny'");
    }

    /// What `sh` makes of the quoted words is exactly the words, whatever they hold.
    #[test]
    fn sh_reads_back_every_word() {
        let words = ["plain", "a b", "it's", "\"q\"", "", "$HOME", "`id`", "$(id)", "*", "x\ny", "\\n", "-c", "é"];
        let script = format!("for a in {}; do printf '%s\\0' \"$a\"; done", join(&words));
        let output = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let back: Vec<&str> = std::str::from_utf8(&output.stdout).unwrap().split_terminator('\0').collect();
        assert_eq!(back, words);
    }
}
