#!/bin/sh
# Build daemons (bench/daemons.py): a second Gradle and Bazel build native, against the same build forwarded to a
# release exec-server that ends the daemon (--daemons end, the former default) and to one that keeps it (the
# default). Prints the table of BENCHMARKS.md's "Build daemons" section. Measures $BENCH_BIN_DIR (bench/run.sh sets
# it), else what images/binaries.sh builds. No containers.
#
# Installs what is missing and can be had: as root, Debian's gradle and bazel-bootstrap (apt). A tool that cannot be
# had is skipped with a line saying so. BENCH_DAEMONS_ROUNDS sets the rounds (default 5; 2 with BENCH_QUICK=1). A
# round of both tools takes 2-4 minutes on a loaded 2-core machine.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
rounds="$(bench_count 5 2 "${BENCH_DAEMONS_ROUNDS:-}")"

tools=""
want() { # $1: command, $2: Debian package, $3...: the tools of daemons.py it serves
    command=$1 package=$2
    shift 2
    if ! command -v "$command" >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bench/daemons: installing $package from Debian's packages" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"; } >/dev/null 2>&1 ||
            echo "bench/daemons: apt-get could not install $package" >&2
    fi
    if command -v "$command" >/dev/null; then
        tools="$tools $*"
    else
        echo "bench/daemons: no $command (Debian package $package): skipping $*" >&2
    fi
}
want gradle gradle gradle-edit gradle-noop
want bazel bazel-bootstrap bazel
if [ -z "$tools" ]; then
    echo "bench/daemons: neither gradle nor bazel can be had: nothing measured" >&2
    exit 0
fi
# shellcheck disable=SC2086 # the tool names are words
exec python3 bench/daemons.py --rounds "$rounds" $tools
