//! `auto-run`: a command runs here when this container can execute its file, else on the host. A binary a macOS
//! host built (Mach-O), or a Linux binary for another CPU, goes to the host; an ELF for this CPU or a `#!` script
//! runs here.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use process_group::program;

/// Where `auto-run` runs a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PanicPlace {
    /// Here, this file.
    Local(PathBuf),
    /// On the host (the file is foreign, or not found here).
    Host,
}

/// Decides for `command`: a name with a `/` is a path (relative to the current directory), else it is looked up on
/// `path` like a shell would.
pub fn place(command: &str, path: &str) -> PanicPlace {
    let file = if program::is_bare_name(OsStr::new(command)) {
        // Relative PATH entries (and an empty one, the current folder) stay relative to the current folder.
        program::executables_on_path(OsStr::new(command), OsStr::new(path), Path::new("")).next()
    } else {
        Some(PathBuf::from(command)).filter(|file| file.is_file())
    };
    match file {
        Some(file) if runs_here(&file) => PanicPlace::Local(file),
        _ => PanicPlace::Host,
    }
}

/// Whether this machine can execute `file`: it starts with `#!`, or it is an ELF for this CPU (class, byte order
/// and machine all match).
pub fn runs_here(file: &Path) -> bool {
    let mut head = [0u8; 20];
    let Ok(mut opened) = std::fs::File::open(file) else { return false };
    let mut read = 0;
    while read < head.len() {
        match opened.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    if read >= 2 && head.starts_with(b"#!") {
        return true;
    }
    if read < 20 || !head.starts_with(b"\x7fELF") {
        return false;
    }
    let class = if cfg!(target_pointer_width = "64") { 2 } else { 1 };
    let data = if cfg!(target_endian = "little") { 1 } else { 2 };
    let machine =
        if data == 1 { u16::from_le_bytes([head[18], head[19]]) } else { u16::from_be_bytes([head[18], head[19]]) };
    head[4] == class && head[5] == data && Some(machine) == this_machine()
}

/// ELF's e_machine for the CPU this binary was built for.
fn this_machine() -> Option<u16> {
    Some(match std::env::consts::ARCH {
        "x86_64" => 62,
        "x86" => 3,
        "aarch64" => 183,
        "arm" => 40,
        "riscv64" | "riscv32" => 243,
        "powerpc64" => 21,
        "powerpc" => 20,
        "s390x" => 22,
        "loongarch64" => 258,
        "mips" | "mips64" => 8,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_binary_runs_here_and_a_mach_o_does_not() {
        let me = std::env::current_exe().unwrap();
        assert!(runs_here(&me));
        let dir = tempfile::tempdir().unwrap();
        let mach_o = dir.path().join("app");
        std::fs::write(&mach_o, [0xcf, 0xfa, 0xed, 0xfe, 0x0c, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            .unwrap();
        assert!(!runs_here(&mach_o));
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(runs_here(&script));
        // An ELF for another CPU.
        let mut foreign = std::fs::read(&me).unwrap()[..64].to_vec();
        foreign[18] = foreign[18].wrapping_add(1);
        std::fs::write(dir.path().join("f"), &foreign).unwrap();
        assert!(!runs_here(&dir.path().join("f")));
    }
}
