#!/bin/sh
# The fault and abuse suite (bench/faults.py) against the binaries as the images ship them (built by images/binaries.sh
# unless BENCH_BIN_DIR names a folder holding them): counted results, exit 1 on any
# failure. About a minute on 2 cores; needs python3 and ~100 MiB free in $TMPDIR.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
exec python3 bench/faults.py
