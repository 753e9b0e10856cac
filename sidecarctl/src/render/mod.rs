//! The plan rendered: `api` as the Engine API bodies `up` creates, `compose` and `kube` as files (sharing `emit`'s
//! options and headers and `yaml`'s writer). A renderer only expresses what the plan decided.

pub mod api;
pub mod compose;
pub mod emit;
pub mod kube;
pub mod yaml;

#[cfg(test)]
mod tests;
