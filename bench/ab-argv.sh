#!/bin/sh
# ab-title: argv parsing: sidecar-exec/src/argv.rs against clap derive (`bench/ab-argv.sh`)
# A/B of sidecar-exec's hand-written command line (sidecar-exec/src/argv.rs and the `match` in main.rs) against clap
# derive for the same surface (sidecar-exec/src/bin/ab_clap.rs, feature `ab-clap`): the same code behind both, so
# the difference is what clap costs the client every wrapped call pays for. Both are built as shipped (release,
# static, images/binaries.sh's flags). Prints a markdown table: binary size, and the start-up medians of
# `--version` and of a forwarded `true` (against one local release exec-server), runs interleaved.
#
#   bench/ab-argv.sh [--section]   AB_RUNS=N runs per arm (default 400; BENCH_QUICK=1: 60)
#
# --section also writes the table as the "A/B: argv parsing" section of BENCHMARKS.md (bench/run.sh does).
# BENCH_BIN_DIR=DIR takes the shipped binaries from DIR instead of building them. Needs python3. Takes about 4
# minutes on 2 cores (two static builds), seconds once they are built.
set -eu
cd "$(dirname "$0")/.."
shipped="${BENCH_BIN_DIR:-$(images/binaries.sh)}"
triple="$(rustc -vV | sed -n 's/^host: //p')"
RUSTFLAGS="$(images/binaries.sh --static-rustflags)" CARGO_TARGET_DIR="$(pwd)/target/ab-argv" \
    cargo build --quiet --release --locked --target "$triple" -p sidecar-exec --features ab-clap --bin sidecar-exec-clap
runs="${AB_RUNS:-$([ "${BENCH_QUICK:-}" = 1 ] && echo 60 || echo 400)}"
python3 - "$shipped/sidecar-exec" "$(pwd)/target/ab-argv/$triple/release/sidecar-exec-clap" "$shipped/exec-server" "$runs" \
    "${1:-}" <<'EOF'
import json, os, statistics, sys, tempfile
sys.path.insert(0, "bench")
import release_server
from bench import spawn_wait
from ssh import write_section

hand, clap, server_bin, runs, section = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
release_server.SERVER = server_bin
with tempfile.TemporaryDirectory() as workspace:
    server = release_server.Server(workspace)
    env = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": server.url}})}
    arms = {"hand-written": hand, "clap derive": clap}
    calls = {"`--version`": ["--version"], "forwarded `true`": ["python", "true"]}
    samples = {(arm, call): [] for arm in arms for call in calls}
    for arm, binary in arms.items():  # warm-up
        for argv in calls.values():
            for _ in range(20):
                spawn_wait([binary, *argv], env, cwd=workspace, stdout="/dev/null")
    for run in range(runs):
        for call, argv in calls.items():
            # Each arm goes first every other run: what a call leaves the server to finish must not fall on one arm.
            for arm, binary in list(arms.items())[::1 if run % 2 else -1]:
                samples[(arm, call)].append(spawn_wait([binary, *argv], env, cwd=workspace, stdout="/dev/null"))
    server.stop()


def gap(measure):
    """clap's figure against ours, in percent."""
    return f"{(measure('clap derive') / measure('hand-written') - 1) * 100:+.1f}%"


def size(arm):
    return os.path.getsize(arms[arm])


def median(call):
    return lambda arm: statistics.median(samples[(arm, call)])


table = ["| measure | hand-written | clap derive | clap against ours |", "| --- | --- | --- | --- |",
         f"| binary size | {size('hand-written') / 1024:.0f} KiB | {size('clap derive') / 1024:.0f} KiB | {gap(size)} |"]
for call in calls:
    m = median(call)
    table.append(f"| {call} start-up, median | {m('hand-written') * 1000:.3f} ms | {m('clap derive') * 1000:.3f} ms "
                 f"| {gap(m)} |")
note = f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {runs} runs per arm, interleaved."
print("\n".join(table) + "\n\n" + note)
if section == "--section":
    heading = "## A/B: argv parsing, hand-written against clap"
    write_section([
        heading, "",
        "sidecar-exec's command line as shipped (`sidecar-exec/src/argv.rs` and the `match` in `main.rs`) against clap",
        "derive for the same surface (`sidecar-exec/src/bin/ab_clap.rs`), the same code behind both, both static release",
        "builds; by `bench/ab-argv.sh`. A gap under 5% would be no reason to keep ours.", "",
        *table, "", note,
    ], heading)
EOF
