//! What this crate (and the tests' survivor checks) read from `/proc`: which processes exist, and each one's state
//! and parent.

/// Every process id listed in `/proc` (a process may be gone by the time it is looked at).
pub fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(Result::ok).filter_map(|entry| entry.file_name().to_str()?.parse().ok()).collect()
}

/// A process's state, parent and process group, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T`, `Z` (zombie), …
    pub state: char,
    pub parent: i32,
    pub group: i32,
}

impl Stat {
    pub fn is_zombie(self) -> bool {
        self.state == 'Z'
    }
}

/// `None` once the process is fully gone (reaped).
pub fn stat(pid: i32) -> Option<Stat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields follow the parenthesised command name, which may itself hold spaces or parentheses.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    Some(Stat {
        state: fields.next()?.chars().next()?,
        parent: fields.next()?.parse().ok()?,
        group: fields.next()?.parse().ok()?,
    })
}
