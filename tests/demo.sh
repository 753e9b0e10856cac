#!/bin/sh
# The main job, end to end, on this machine: build, start an exec-server for the python runtime on a temporary
# workspace, install the wrappers in a temporary folder on a PATH that has no python, run `python3` through its
# wrapper (it runs in the server), and stop the server. Needs cargo and a python3 for the server side.
set -eu
cd "$(dirname "$0")/.."

echo "==> building (debug profile, shared with the tests)"
# Cargo's own progress (on stderr): on a fresh clone the first build takes a minute or more.
cargo build --bins
bin="$(pwd)/target/debug"

tmp="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

workspace="$tmp/workspace"
wrappers="$tmp/wrappers"
no_python="$tmp/empty-bin"   # the agent's PATH: no python anywhere on it
mkdir -p "$workspace" "$no_python"

echo "==> starting exec-server (runtime python) on a free port, workspace $workspace"
mkfifo "$tmp/log.fifo"
"$bin/exec-server" --host 127.0.0.1 --port 0 --cwd "$workspace" --runtime python --grace 2 2>"$tmp/log.fifo" &
server_pid=$!
# Readiness: the server's own "listening" line (it carries the port it got).
exec 3<"$tmp/log.fifo"
port=""
while IFS= read -r line <&3; do
    case "$line" in *"exec-server listening"*) port="${line##*127.0.0.1:}"; port="${port%% *}"; break ;; esac
done
[ -n "$port" ] || { echo "exec-server did not start" >&2; exit 1; }
cat <&3 >"$tmp/server.log" &
echo "    listening on 127.0.0.1:$port"

export BUILD_SIDECARS="{\"python\":{\"internal_url\":\"http://127.0.0.1:$port\"}}"
echo "==> BUILD_SIDECARS=$BUILD_SIDECARS"
"$bin/sidecar-exec" --status

echo "==> installing wrappers in $wrappers (PATH has no python, so every python command is wrapped)"
PATH="$no_python" "$bin/sidecar-exec" --install-wrappers "$wrappers"

cd "$workspace"
agent_path="$wrappers:$no_python"
echo "==> on the agent's PATH, python3 is: $(PATH="$agent_path" command -v python3)"
echo "==> running: python3 -c '…' (through the wrapper)"
PATH="$agent_path" python3 -c '
import os, sys
print(f"hello from python {sys.version.split()[0]} at {sys.executable}, pid {os.getpid()}, cwd {os.getcwd()}")
open("written-by-builder.txt", "w").write("written by the builder\n")
print("to stderr", file=sys.stderr)
'
echo "==> the file it wrote is in the shared workspace: $(cat "$workspace/written-by-builder.txt")"

echo "==> streaming mode and exit codes: python3 -c 'print(1); raise SystemExit(3)'"
status=0
SIDECAR_STREAM=1 PATH="$agent_path" python3 -c 'print(1); raise SystemExit(3)' || status=$?
echo "    exit code $status"
[ "$status" -eq 3 ] || { echo "expected exit code 3" >&2; exit 1; }

echo "==> stopping the server (SIGTERM)"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
echo "==> what the server logged (one line per command; it ran them, not this shell):"
grep "command finished" "$tmp/server.log" | sed 's/^/    /'
grep -q 'program="python3"' "$tmp/server.log" || { echo "the server never ran python3" >&2; exit 1; }
echo "==> demo OK"
