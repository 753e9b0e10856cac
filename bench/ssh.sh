#!/bin/sh
# ssh-exec's per-call overhead against plain ssh over the same warm master (bench/ssh.py), on a local sshd it starts
# itself; writes the "SSH: per-call overhead" section of BENCHMARKS.md. Measures the binary users get:
# $BENCH_BIN_DIR/ssh-exec (bench/run.sh sets it), else the one images/binaries.sh ships. Needs python3, OpenSSH's
# client and server (sshd); prints "skipped" and exits 0 without an sshd. BENCH_SSH_RUNS sets the runs per side
# (default 200; 20 with BENCH_QUICK=1).
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_binaries
exec python3 bench/ssh.py "$BENCH_BIN_DIR/ssh-exec"
