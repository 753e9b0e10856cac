#!/bin/sh
# P8: keystroke -> echo round trip through sidecar-exec in TTY mode against a release exec-server on
# 127.0.0.1, with `ssh -tt` to a private sshd on 127.0.0.1 in the same run as the anchor (bench/p8.py, which uses
# bench/pty_latency.py). Prints one line per case (p50/p90/p99 in µs) for BENCHMARKS.md's "P8" section. Measures
# $BENCH_BIN_DIR (bench/run.sh sets it), else what images/binaries.sh builds. Needs openssh-server for the anchor
# (skipped with a line without it). BENCH_P8_KEYS sets the keystrokes per case (default 1000; 200 with BENCH_QUICK=1).
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
keys="$(bench_count 1000 200 "${BENCH_P8_KEYS:-}")"
exec python3 bench/p8.py --keys "$keys" "$@"
