//! The installer as a program runs it: `--install-wrappers` calls the one its binary hands it, because the installer
//! ([`crate::wrappers`]) is built on the programs' parts (BUILD_SIDECARS, the HTTP client) and so sits above them.

use std::path::PathBuf;

/// `--install-wrappers [DIR]` (`None`: the default folder), giving the exit code. Each binary hands its program
/// [`crate::wrappers::program::install_wrappers`] bound to its own client, so neither program names the installer.
pub type Installer = fn(Option<PathBuf>) -> i32;
