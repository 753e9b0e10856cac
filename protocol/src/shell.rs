//! Quoting for a POSIX shell, in one place: how sidecar-exec's wrappers name the client, how ssh-exec hands a
//! command line to the host, and how sidecarctl writes the command lines in its emitted files.

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

/// `text` as one word for `sh`, bare when it is made only of characters no shell treats specially (paths, image
/// names, flags), else [`quote`]d: for command lines that people read (the emitted files' headers).
pub fn word(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_owned()
    } else {
        quote(text)
    }
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

    #[test]
    fn readable_words_stay_bare() {
        assert_eq!(word("./workspace"), "./workspace");
        assert_eq!(word("sidecar-agent:latest"), "sidecar-agent:latest");
        assert_eq!(word("python3 -c 'print(1)'"), r"'python3 -c '\''print(1)'\'''");
        assert_eq!(word(""), "''");
        assert_eq!(word("~"), "'~'");
    }

    /// What `sh` makes of the quoted words is exactly the words, whatever they hold.
    #[test]
    fn sh_reads_back_every_word() {
        let words = ["plain", "a b", "it's", "\"q\"", "", "$HOME", "`id`", "$(id)", "*", "x\ny", "\\n", "-c", "é"];
        let script = format!("for a in {}; do printf '%s\\0' \"$a\"; done", join(&words));
        let output = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let back: Vec<&str> = std::str::from_utf8(&output.stdout).unwrap().split_terminator('\0').collect();
        assert_eq!(back, words);
        let script = format!(
            "for a in {}; do printf '%s\\0' \"$a\"; done",
            words.iter().map(|w| word(w)).collect::<Vec<_>>().join(" ")
        );
        let output = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let back: Vec<&str> = std::str::from_utf8(&output.stdout).unwrap().split_terminator('\0').collect();
        assert_eq!(back, words);
    }
}
