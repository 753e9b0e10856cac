#!/bin/sh
# ssh-exec's per-call overhead against plain ssh over the same warm master (bench/ssh.py), on a local sshd it starts
# itself; writes the "SSH: per-call overhead" section of BENCHMARKS.md. Measures the binary users get:
# $BENCH_BIN_DIR/ssh-exec when that exists, else the static build images/binaries.sh makes of the client crate
# (both of its binaries land in target/static). Needs python3, OpenSSH's client and server (sshd); prints "skipped"
# and exits 0 without an sshd. BENCH_SSH_RUNS sets the runs per side (default 200; 20 with BENCH_QUICK=1).
set -eu
cd "$(dirname "$0")/.."
if [ -n "${BENCH_BIN_DIR:-}" ] && [ -x "$BENCH_BIN_DIR/ssh-exec" ]; then
    bin="$BENCH_BIN_DIR/ssh-exec"
else
    images/binaries.sh >/dev/null
    bin="$(pwd)/target/static/$(rustc -vV | sed -n 's/^host: //p')/release/ssh-exec"
fi
exec python3 bench/ssh.py "$bin"
