#!/bin/sh
# ab-title: JSON: protocol's hand-written encoder and the client's reply reader against serde_json (`bench/ab-json.sh`)
# A/B of protocol's hand-written JSON (protocol/src/json.rs, frames.rs chunk_event, ExecReply::to_json and the
# client's reply reader, sidecar-exec/src/sidecar/wire/reply_reader.rs) against serde_json on the same workloads
# (sidecar-exec/examples/ab_json.rs): prints a markdown table. --section also writes it as the "Hand-written JSON
# against serde_json" section of BENCHMARKS.md (bench/run.sh does).
# AB_MIB=N sets the size of each workload (default 64), AB_ROUNDS=N the rounds per figure (default 7, median).
set -eu
cd "$(dirname "$0")/.."
table="$(cargo run --quiet --release --locked -p sidecar-exec --example ab_json)"
printf '%s\n' "$table"
if [ "${1:-}" = "--section" ]; then
    printf '%s\n' "$table" | python3 -c '
import sys
sys.path.insert(0, "bench")
from ssh import write_section
title = "## Hand-written JSON against serde_json"
write_section([title, "",
    "The same bytes encoded (and read back) by the hand-written code and by serde_json, in process, by",
    "`bench/ab-json.sh` (sidecar-exec/examples/ab_json.rs; every pair of outputs checked equal). Frames: from the pipe bytes",
    "to the SSE event, as the server does it; replies: one `ExecReply` encoded; reading: a reply body to stdout'"'"'s",
    "bytes, as the client does it. Median of the rounds; a gap under 5% would mean using serde_json.", ""]
    + sys.stdin.read().rstrip("\n").split("\n"), section=title)
'
fi
