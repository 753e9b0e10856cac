//! sidecarctl integration tests, one test binary: the real sidecarctl against real engines (each engine test once
//! on Docker and once on Podman) and its emitters against the validators. Tests that need an engine or a validator
//! are `#[ignore]`d with the reason, so the summary counts them; `--include-ignored` runs them (CI does), and then
//! a missing prerequisite is a failure.

mod agent;
mod caches;
mod discovery;
mod emitters;
mod engines;
mod images;
mod kube_schemas;
mod own_engine;
mod runs;
mod up;
