//! The five runtimes a build sidecar can serve: the ones the wrapper generator (sidecar-exec) knows.

use std::fmt;
use std::str::FromStr;

/// A builder's runtime. Anything else fails validation, because the agent would get no wrappers for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    Node,
    Python,
    Java,
    Go,
    Rust,
}

impl Runtime {
    pub const ALL: [Runtime; 5] = [Runtime::Node, Runtime::Python, Runtime::Java, Runtime::Go, Runtime::Rust];

    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Node => "node",
            Runtime::Python => "python",
            Runtime::Java => "java",
            Runtime::Go => "go",
            Runtime::Rust => "rust",
        }
    }

    /// "node, python, java, go, rust": the list the validation messages quote.
    pub fn list() -> String {
        Runtime::ALL.map(Runtime::as_str).join(", ")
    }

    /// The image `--sidecar RT` runs when nothing retargets it.
    pub fn default_image(self) -> String {
        format!("sidecar-builder-{}:latest", self.as_str())
    }

    /// The network alias (compose: the service name) the agent reaches the builder by.
    pub fn alias(self) -> String {
        format!("builder-{}", self.as_str())
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Not one of the five; the caller words the message for where the name came from.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownRuntime;

impl FromStr for Runtime {
    type Err = UnknownRuntime;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Runtime::ALL.into_iter().find(|rt| rt.as_str() == name).ok_or(UnknownRuntime)
    }
}
