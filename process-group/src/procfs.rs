//! What this crate (and the tests' survivor checks, and exec-server's daemon rule) read from `/proc`: which processes
//! exist, each one's state, parent, group, session and terminal, what its descriptors are, and which sockets listen.

use std::collections::HashSet;

/// Every process id listed in `/proc` (a process may be gone by the time it is looked at).
pub fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(Result::ok).filter_map(|entry| entry.file_name().to_str()?.parse().ok()).collect()
}

/// A process's state, parent, process group, session and controlling terminal, from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T`, `Z` (zombie), …
    pub state: char,
    pub parent: i32,
    pub group: i32,
    pub session: i32,
    /// The controlling terminal's device number; 0 for none.
    pub tty: i32,
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
        session: fields.next()?.parse().ok()?,
        tty: fields.next()?.parse().ok()?,
    })
}

/// What each open descriptor of `pid` refers to, as `/proc/<pid>/fd` links read: a path, `pipe:[INODE]`,
/// `socket:[INODE]`, … Empty when they cannot be read (gone, or another user's).
pub fn descriptors(pid: i32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect()
}

/// The inodes of the sockets that listen in `pid`'s network namespace: TCP (v4 and v6) in state LISTEN, and UNIX
/// stream sockets that accept connections.
pub fn listening_sockets(pid: i32) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["tcp", "tcp6"] {
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …; st 0A is LISTEN.
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for fields in text.lines().skip(1).map(|line| line.split_whitespace().collect::<Vec<_>>()) {
            if fields.get(3) == Some(&"0A") {
                inodes.extend(fields.get(9).and_then(|inode| inode.parse::<u64>().ok()));
            }
        }
    }
    // Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 is __SO_ACCEPTCON (listen() was called).
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).unwrap_or_default();
    for fields in text.lines().skip(1).map(|line| line.split_whitespace().collect::<Vec<_>>()) {
        let accepts =
            fields.get(3).and_then(|flags| u32::from_str_radix(flags, 16).ok()).is_some_and(|f| f & 0x10000 != 0);
        if accepts {
            inodes.extend(fields.get(6).and_then(|inode| inode.parse::<u64>().ok()));
        }
    }
    inodes
}

/// The inodes of the sockets among `pid`'s descriptors.
pub fn socket_inodes(pid: i32) -> Vec<u64> {
    descriptors(pid)
        .iter()
        .filter_map(|target| target.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_stat_session_and_a_listening_socket() {
        let own = std::process::id() as i32;
        let stat = stat(own).unwrap();
        assert_eq!(stat.session, nix::unistd::getsid(None).unwrap().as_raw());
        assert_eq!(stat.group, nix::unistd::getpgrp().as_raw());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let unix = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        let ours = socket_inodes(own);
        let listening = listening_sockets(own);
        assert_eq!(ours.iter().filter(|inode| listening.contains(inode)).count(), 2, "{ours:?} {listening:?}");
        let connected = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(socket_inodes(own).iter().filter(|inode| listening_sockets(own).contains(inode)).count(), 2);
        drop((connected, accepted, unix));
    }
}
