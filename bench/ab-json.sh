#!/bin/sh
# A/B of protocol's hand-written JSON encoder (protocol/src/json.rs, frames.rs chunk_event, ExecReply::to_json)
# against serde_json on the same workloads (protocol/examples/ab_json.rs): prints a markdown table.
# AB_MIB=N sets the size of each workload (default 64), AB_ROUNDS=N the rounds per figure (default 7, median).
set -eu
cd "$(dirname "$0")/.."
cargo run --quiet --release --locked -p sidecar-protocol --example ab_json
