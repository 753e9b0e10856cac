#!/bin/sh
# The fault and abuse suite (bench/faults.py) against release binaries: counted results, exit 1 on any failure.
# About a minute on 2 cores; needs python3 and ~100 MiB free in $TMPDIR. BENCH_BIN_DIR=DIR uses the binaries in
# DIR instead of building target/release (CI passes the static build images/test.sh already made).
set -eu
cd "$(dirname "$0")/.."
if [ -z "${BENCH_BIN_DIR:-}" ]; then
    cargo build --release --quiet -p exec-server -p sidecar-exec
fi
exec python3 bench/faults.py
