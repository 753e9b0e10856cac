#!/bin/sh
# A/B: the client's hand-written SSE reader (sidecar-exec/src/sidecar/wire/sse.rs) against eventsource-stream, the crate the design
# card names, on the same 64 MiB streams (many small frames, big frames, few huge frames): throughput and peak RSS,
# each measurement in its own process (sidecar-exec/examples/ab_sse.rs says how). Prints a markdown table on stdout;
# bench/ab.sh puts it in BENCHMARKS.md. BENCH_AB_RUNS sets the runs per cell (default 5; 1 with BENCH_QUICK=1).
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
runs="$(bench_count 5 1 "${BENCH_AB_RUNS:-}")"
cargo build --quiet --release --locked -p sidecar-exec --example ab_sse
echo "### SSE reader: sidecar::wire::sse against eventsource-stream"
echo
echo "\`bench/ab-sse.sh\`: 64 MiB of exec-server-like events per stream, in 16 KiB pieces through a \`futures\` stream"
echo "(as reqwest hands them to the client); each figure from its own process; \"no parsing\" is the harness alone."
echo
target/release/examples/ab_sse --runs "$runs"
