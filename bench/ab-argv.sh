#!/bin/sh
# ab-title: argv parsing: clap derive (shipped) against the hand-written parser it replaced (`bench/ab-argv.sh`)
# A/B of sidecar-exec's command line as shipped (clap derive: sidecar-exec/src/argv.rs, sidecar/program.rs) against
# the hand-written `match` it replaced, parsing into the same actions (sidecar-exec/src/bin/ab_hand.rs, feature
# `ab-hand`): the same code behind both, so the difference is what clap costs the client every wrapped call pays
# for. Both are built as shipped (release, static, images/binaries.sh's flags). Prints a markdown table: binary size,
# the start-up medians of `--version` and of a forwarded `true` (against one local release exec-server), runs
# interleaved, and, where valgrind is installed, the client's own instructions for each (callgrind: the same count
# however loaded the machine is, where the times are not).
#
#   bench/ab-argv.sh [--section]   AB_RUNS=N runs per arm (default 400; BENCH_QUICK=1: 60)
#
# --section also writes the table as the "A/B: argv parsing" section of BENCHMARKS.md (bench/run.sh does).
# BENCH_BIN_DIR=DIR takes the shipped binaries from DIR instead of building them. Needs python3. Takes about 4
# minutes on 2 cores (two static builds), seconds once they are built.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
shipped="$BENCH_BIN_DIR"
triple="$(rustc -vV | sed -n 's/^host: //p')"
RUSTFLAGS="$(images/binaries.sh --static-rustflags)" CARGO_TARGET_DIR="$(pwd)/target/ab-argv" \
    cargo build --quiet --release --locked --target "$triple" -p sidecar-exec --features ab-hand --bin sidecar-exec-hand
runs="$(bench_count 400 60 "${AB_RUNS:-}")"
python3 - "$shipped/sidecar-exec" "$(pwd)/target/ab-argv/$triple/release/sidecar-exec-hand" "$shipped/exec-server" "$runs" \
    "${1:-}" <<'EOF'
import json, os, re, shutil, statistics, subprocess, sys, tempfile
sys.path.insert(0, "bench")
import release_server
from bench import spawn_wait
from ssh import write_section

clap, hand, server_bin, runs, section = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
release_server.SERVER = server_bin
with tempfile.TemporaryDirectory() as workspace:
    server = release_server.Server(workspace)
    env = {"PATH": "/usr/bin:/bin", "BUILD_SIDECARS": json.dumps({"python": {"internal_url": server.url}})}
    arms = {"clap derive (shipped)": clap, "hand-written": hand}
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
    # Instructions: the client's user-space instructions under callgrind, the median of 3 runs each.
    instructions = {}
    if shutil.which("valgrind"):
        for arm, binary in arms.items():
            for call, argv in calls.items():
                counts = []
                for _ in range(3):
                    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, *argv],
                                         env=env, cwd=workspace, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    counts.append(int(re.search(r"Collected : (\d+)", run.stderr).group(1)))
                instructions[(arm, call)] = statistics.median(counts)
    server.stop()


CLAP, HAND = "clap derive (shipped)", "hand-written"


def gap(measure):
    """clap's figure against the hand-written parser's, in percent."""
    return f"{(measure(CLAP) / measure(HAND) - 1) * 100:+.1f}%"


def size(arm):
    return os.path.getsize(arms[arm])


def median(call):
    return lambda arm: statistics.median(samples[(arm, call)])


table = [f"| measure | {CLAP} | {HAND} | clap against hand-written |", "| --- | --- | --- | --- |",
         f"| binary size | {size(CLAP) / 1024:.0f} KiB | {size(HAND) / 1024:.0f} KiB | {gap(size)} |"]
for call in calls:
    m = median(call)
    table.append(f"| {call} start-up, median | {m(CLAP) * 1000:.3f} ms | {m(HAND) * 1000:.3f} ms | {gap(m)} |")
for call in calls:
    if instructions:
        count = lambda arm: instructions[(arm, call)]
        table.append(f"| {call}: the client's instructions (callgrind) | {count(CLAP):,.0f} | {count(HAND):,.0f} "
                     f"| {gap(count)} ({count(CLAP) - count(HAND):+,.0f}) |")
note = f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {runs} runs per arm, interleaved."
print("\n".join(table) + "\n\n" + note)
if section == "--section":
    heading = "## A/B: argv parsing, clap derive against hand-written"
    write_section([
        heading, "",
        "sidecar-exec's command line as shipped (clap derive) against the hand-written parser it replaced",
        "(`sidecar-exec/src/bin/ab_hand.rs`), the same code behind both, both static release builds; by",
        "`bench/ab-argv.sh`. What a forwarded call pays decides: a gap under 5% is no reason for hand-written code.", "",
        *table, "", note,
    ], heading)
EOF
