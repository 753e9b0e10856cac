//! What a named run keeps of its command: a digest of the whole argv and cwd (an id names one command in one
//! folder: what a repeated request is compared with), and the argv cut to [`SHOWN_BYTES`] for people (`RunInfo`, the
//! 409's message). A run's argv may be up to the 1 MiB a request body holds, and was kept whole by every kept run,
//! outside `--run-memory`, and sent whole in every `GET /runs`.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

/// The bytes of argv a run keeps to show, each argument counted with [`PER_ARGUMENT`] more (and the cut markers).
pub const SHOWN_BYTES: usize = 4096;
/// What an argument costs beside its bytes (its `String`), so that many empty ones are bounded too.
const PER_ARGUMENT: usize = 24;

#[derive(Debug, Clone)]
pub struct KeptArgv {
    shown: Vec<String>,
    digest: u64,
}

impl KeptArgv {
    pub fn new(argv: &[String], cwd: &Path) -> Self {
        KeptArgv { shown: shown(argv), digest: command_digest(argv, cwd) }
    }

    /// Whether `argv` in `cwd` is this command (a digest: two commands that collide under one id would share a run,
    /// as two requests for it do; both come from token holders, who may read any run anyway).
    pub fn is_of(&self, argv: &[String], cwd: &Path) -> bool {
        self.digest == command_digest(argv, cwd)
    }

    /// The argv as shown: whole when it fits, else cut, the cut marked where it is.
    pub fn shown(&self) -> &[String] {
        &self.shown
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }
}

/// A digest of a command and its folder.
pub fn command_digest(argv: &[String], cwd: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    argv.hash(&mut hasher);
    cwd.hash(&mut hasher);
    hasher.finish()
}

/// `argv` within [`SHOWN_BYTES`]: the arguments that fit whole, then the next one cut (`…[N bytes cut]`), then
/// `…[M more arguments]` for those that do not fit at all.
fn shown(argv: &[String]) -> Vec<String> {
    let mut left = SHOWN_BYTES;
    let mut shown = Vec::new();
    for (index, arg) in argv.iter().enumerate() {
        if arg.len() + PER_ARGUMENT <= left {
            left -= arg.len() + PER_ARGUMENT;
            shown.push(arg.clone());
            continue;
        }
        let mut keep = left.saturating_sub(PER_ARGUMENT).min(arg.len());
        while !arg.is_char_boundary(keep) {
            keep -= 1;
        }
        // Nothing of it would be cut (a short one past the bound): it is one of the arguments left out.
        let cut = keep < arg.len();
        if cut {
            shown.push(format!("{}…[{} bytes cut]", &arg[..keep], arg.len() - keep));
        }
        let more = argv.len() - index - usize::from(cut);
        if more > 0 {
            shown.push(format!("…[{more} more arguments]"));
        }
        break;
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_argv_is_kept_whole_a_long_one_is_cut_where_it_says() {
        let short: Vec<String> = ["cargo", "build", "--release"].map(String::from).into();
        assert_eq!(shown(&short), short);
        let long: Vec<String> = vec!["sh".into(), "-c".into(), "é".repeat(100_000), "x".into(), "y".into()];
        let cut = shown(&long);
        assert_eq!(cut.len(), 4, "{:?}", cut.iter().map(String::len).collect::<Vec<_>>());
        assert!(cut[2].ends_with(" bytes cut]") && cut[2].starts_with("éé"));
        assert_eq!(cut[3], "…[2 more arguments]");
        let total: usize = cut.iter().map(|arg| arg.len() + PER_ARGUMENT).sum();
        assert!(total <= SHOWN_BYTES + 128, "at most the bound and the two markers: {total}");
        let many = vec![String::new(); 100_000];
        let few = shown(&many);
        assert_eq!(few.len(), SHOWN_BYTES / PER_ARGUMENT + 1);
        assert_eq!(few.last().unwrap(), &format!("…[{} more arguments]", 100_000 - SHOWN_BYTES / PER_ARGUMENT));
    }

    #[test]
    fn the_digest_tells_commands_and_folders_apart() {
        let argv: Vec<String> = vec!["a".into(), "b".into()];
        let kept = KeptArgv::new(&argv, Path::new("/w"));
        assert!(kept.is_of(&argv, Path::new("/w")));
        assert!(!kept.is_of(&argv, Path::new("/x")));
        assert!(!kept.is_of(&["ab".into()], Path::new("/w")));
    }
}
