#!/bin/sh
# /health latency while 8 clients send the largest requests the server takes (bench/health_under_load.py): the
# attack's 80 000 empty variables (refused after its parse) and the largest request it runs, against the same server
# idle in the same run. Goal: p99 <= 10 ms under load (exit 1 when missed). Prints the table of BENCHMARKS.md's
# "A few large requests" section. BENCH_HEALTH_PROBES sets the /health requests per case (default 2000; 300 with
# BENCH_QUICK=1). Measures $BENCH_BIN_DIR (bench/run.sh sets it), else what images/binaries.sh builds.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
probes="$(bench_count 2000 300 "${BENCH_HEALTH_PROBES:-}")"
exec python3 bench/health_under_load.py --probes "$probes" "$@"
