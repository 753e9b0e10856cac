//! The server's memory and descriptors, closed to the commands it runs: `PR_SET_DUMPABLE` 0.

/// Makes this process not dumpable. Commands run as the server's user, and a process of the same user may read
/// another's `/proc/PID/mem`, `/proc/PID/environ` and `/proc/PID/fd/*` (the spill files, the token's copies in
/// memory) and ptrace it; once it is not dumpable those belong to root. The flag is not inherited across
/// `execve`, so the commands are as they were. It does not hide anything from root (a command run as root can
/// still read all of it) and it turns off core dumps.
pub fn hide_from_commands() -> nix::Result<()> {
    nix::sys::prctl::set_dumpable(false)
}
