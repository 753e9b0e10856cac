#!/bin/sh
# P6, real work through the wrappers (bench/p6.py): cargo build, pytest, npm install and go build through generated
# wrappers to a release exec-server on this machine, against the same builds run natively, interleaved; writes the
# "P6: real work through the wrappers" section of BENCHMARKS.md (replacing its own). Measures the binaries users get:
# $BENCH_BIN_DIR (bench/run.sh sets it), else what images/binaries.sh builds. No containers.
#
# Installs what is missing and can be had: pytest from PyPI into target/p6-venv; as root, Debian's golang-go and npm
# (apt). A tool that cannot be had is skipped with a line saying so. BENCH_P6_ROUNDS sets the rounds per side
# (default 11; 3 with BENCH_QUICK=1).
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
rounds="$(bench_count 11 3 "${BENCH_P6_ROUNDS:-}")"

venv=target/p6-venv
if [ ! -x "$venv/bin/pytest" ]; then
    { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet pytest; } >&2 ||
        echo "bench/p6: cannot install pytest into $venv (PyPI unreachable?): pytest will be skipped" >&2
fi
apt_install() { # $1: command, $2: Debian package
    command -v "$1" >/dev/null && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bench/p6: installing $2 from Debian's packages for the $1 workload" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; } >/dev/null 2>&1 ||
            echo "bench/p6: apt-get could not install $2: the $1 workload will be skipped" >&2
    else
        echo "bench/p6: no $1 and no way to install $2 (not root or no apt-get): the $1 workload will be skipped" >&2
    fi
}
apt_install go golang-go
apt_install npm npm
exec python3 bench/p6.py --section --rounds "$rounds"
