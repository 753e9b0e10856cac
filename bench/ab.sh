#!/bin/sh
# Runs every A/B in bench/ (bench/ab-*.sh: each measures a hand-written part against the crate the design card names
# and prints a markdown table) and writes their tables as the "A/B: hand-written against the crate" section of
# BENCHMARKS.md, replacing an earlier one. Called by bench/run.sh; BENCH_QUICK=1 is passed on.
set -eu
cd "$(dirname "$0")/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
{
    echo "## A/B: hand-written against the crate"
    echo
    echo "Each hand-written part against the crate the design card names for its job, on the same workload (the rule:"
    echo "a gap under 5% is no reason to keep hand-written code). Rerun one with its script, all with \`bench/ab.sh\`."
    for script in bench/ab-*.sh; do
        [ -e "$script" ] || continue
        echo "bench/ab: $script" >&2
        echo
        # A script whose table has no heading of its own names it in a `# ab-title:` comment.
        title="$(sed -n 's/^# ab-title: //p' "$script")"
        if [ -n "$title" ]; then
            echo "### $title"
            echo
        fi
        sh "$script"
    done
} >"$out"
python3 - "$out" <<'PY'
import sys
sys.path.insert(0, "bench")
from ssh import write_section
lines = open(sys.argv[1]).read().rstrip("\n").split("\n")
write_section(lines, lines[0])
PY
