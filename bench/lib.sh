# shellcheck shell=sh
# What the bench/*.sh scripts share, sourced first by each (`. "$(dirname "$0")/lib.sh"`, after `set -eu`): they
# run from the repository's root, measure the binaries users get, and count their runs by one BENCH_QUICK rule.
cd "$(dirname "$0")/.." || exit 1

# Sets and exports BENCH_BIN_DIR, the folder of the binaries measured: as given (bench/run.sh sets it once for all
# its benchmarks), else the release binaries as the images ship them, from images/binaries.sh. Exported for the
# Python benchmarks a script starts.
bench_binaries() {
    if [ -z "${BENCH_BIN_DIR:-}" ]; then
        BENCH_BIN_DIR="$(images/binaries.sh)"
    fi
    export BENCH_BIN_DIR
}

# bench_count FULL QUICK [GIVEN]: how many runs, rounds or keys a benchmark takes: GIVEN when it is not empty (the
# script's own variable, e.g. "${BENCH_P8_KEYS:-}"), else QUICK with BENCH_QUICK=1 (to check a script, not to quote
# its figures), else FULL.
bench_count() {
    if [ -n "${3:-}" ]; then
        echo "$3"
    elif [ "${BENCH_QUICK:-}" = 1 ]; then
        echo "$2"
    else
        echo "$1"
    fi
}
