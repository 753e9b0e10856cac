#!/bin/sh
# Builds the binaries as the images ship them (images/binaries.sh) and runs every benchmark;
# writes BENCHMARKS.md and bench/latency.svg. BENCH_QUICK=1 runs reduced counts (to check the script, not to quote);
# BENCH_BIN_DIR=DIR measures the binaries in DIR instead. Needs python3, bash, jq (for the shell-executor baseline)
# and ~600 MiB free in $TMPDIR. Takes about 3 minutes on 2 cores, plus about 5 for P6 and the A/Bs.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "bench: jq is needed for the shell-executor baseline (apt-get install jq)" >&2; exit 1; }
bench_binaries
p1_runs="$(bench_count 400 60)"
python3 bench/bench.py
# P1 over a UNIX socket against TCP, same server (appends its own section).
python3 bench/p1_pair.py --client "$BENCH_BIN_DIR/sidecar-exec" --runs "$p1_runs" \
    --section tcp="$BENCH_BIN_DIR/exec-server" unix="$BENCH_BIN_DIR/exec-server,unix"
# The default path: P1 in each mode against the old blocking call, and P7 (100 MiB piped in), measured in
# the same run (appends its own section).
python3 bench/p1_modes.py --client "$BENCH_BIN_DIR/sidecar-exec" --server "$BENCH_BIN_DIR/exec-server" \
    --runs "$p1_runs" --p7-runs "$(bench_count 5 2)" --section
# Where a forwarded call's time goes: its parts measured apart, interleaved (appends its own section).
python3 bench/p1_breakdown.py --client "$BENCH_BIN_DIR/sidecar-exec" --server "$BENCH_BIN_DIR/exec-server" \
    --runs "$p1_runs" --section
# P1 through the generated (link) wrapper against the `#!/bin/sh` wrapper it replaced (appends its own section).
python3 bench/wrapper.py --section --runs "$p1_runs"
# Optional: ssh-exec against plain ssh, on a local sshd bench/ssh.sh starts itself (appends its own section).
if [ -x /usr/sbin/sshd ] || [ -x /usr/local/sbin/sshd ]; then
    bench/ssh.sh
else
    echo "bench: no sshd here, so no SSH section (install openssh-server to measure ssh-exec)" >&2
fi
# Optional: sidecarctl up → the agent's first command, on podman with the images images/test.sh builds (replaces its
# own section).
if command -v podman >/dev/null && podman image exists localhost/sidecar-agent:latest 2>/dev/null; then
    bench/sidecarctl-up.sh
else
    echo "bench: no podman or no images here, so no sidecarctl section (run images/test.sh first)" >&2
fi
# P8: keystroke -> echo in TTY mode against ssh -tt in the same run (prints its table; BENCHMARKS.md's P8 section
# quotes it).
bench/p8.sh
# /health while 8 clients send the largest requests, against idle in the same run (prints its table; BENCHMARKS.md's
# "A few large requests" section quotes it).
bench/health_under_load.sh
# P6: real builds (cargo, pytest, npm, go) through generated wrappers against the same builds natively (replaces its
# own section; installs pytest into target/p6-venv and, as root, golang-go/npm when missing).
bench/p6.sh
# The A/Bs of the hand-written parts against their crates (bench/ab-*.sh, ab-json.sh among them; replaces its own
# section).
bench/ab.sh
