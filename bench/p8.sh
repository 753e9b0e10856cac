#!/bin/sh
# P8 (issue 23): keystroke -> echo round trip through sidecar-exec in TTY mode against a release exec-server on
# 127.0.0.1, with `ssh -tt` to a private sshd on 127.0.0.1 in the same run as the anchor (bench/p8.py, which uses
# bench/pty_latency.py). Prints one line per case (p50/p90/p99 in µs) for BENCHMARKS.md's "P8" section. Measures
# $BENCH_BIN_DIR (bench/run.sh sets it), else what images/binaries.sh builds. Needs openssh-server for the anchor
# (skipped with a line without it). BENCH_P8_KEYS sets the keystrokes per case (default 1000; 200 with BENCH_QUICK=1).
set -eu
cd "$(dirname "$0")/.."
BENCH_BIN_DIR="${BENCH_BIN_DIR:-$(images/binaries.sh)}"
export BENCH_BIN_DIR
keys="${BENCH_P8_KEYS:-1000}"
if [ -z "${BENCH_P8_KEYS:-}" ] && [ "${BENCH_QUICK:-}" = 1 ]; then
    keys=200
fi
exec python3 bench/p8.py --keys "$keys" "$@"
