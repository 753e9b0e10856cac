#!/bin/sh
# The fault and abuse suite (bench/faults.py) against the binaries as the images ship them (built by images/binaries.sh
# unless BENCH_BIN_DIR names a folder holding them): counted results, exit 1 on any
# failure. About a minute on 2 cores; needs python3 and ~100 MiB free in $TMPDIR.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${BENCH_BIN_DIR:-}" ]; then
    BENCH_BIN_DIR="$(images/binaries.sh)"
    export BENCH_BIN_DIR
fi
exec python3 bench/faults.py
