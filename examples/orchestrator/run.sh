#!/bin/sh
# The worked example in one command: build sidecar-ipc, start `sidecar-ipc prompt-server --replay` (canned answers)
# on a temporary IPC folder, run the photo tagger under `sidecar-ipc run`, and print the run result. Needs cargo
# (unless SIDECAR_IPC names an already built binary, as the integration test does) and a POSIX shell.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${SIDECAR_IPC:-}" ]; then
    echo "==> building sidecar-ipc"
    # From the workspace root, where a relative CARGO_TARGET_DIR is resolved too.
    SIDECAR_IPC=$(cd "$here/../.." && cargo build -p sidecar-ipc && cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/sidecar-ipc
fi
export SIDECAR_IPC

tmp=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# Every sidecar-ipc call below (and in tagger.sh) finds the IPC folder here instead of /ipc.
export SIDECAR_IPC_ROOT="$tmp/ipc"
mkdir -p "$SIDECAR_IPC_ROOT"

echo "==> the agent's side: sidecar-ipc prompt-server --replay answers.jsonl"
"$SIDECAR_IPC" prompt-server --replay "$here/answers.jsonl" --audit "$tmp/audit.jsonl" \
    >"$tmp/run-result.json" 2>"$tmp/prompt-server.log" &
server_pid=$!

# What the controller would set from the AgentRun's task.parameters.
export SYMPOZIUM_RUN_CONFIG_JSON="{\"inputDir\": \"$here/photos\", \"outputDir\": \"$tmp/tags\"}"
echo "==> the orchestrator: sidecar-ipc run -- tagger.sh (the canned answer for blurry.txt is not JSON: it is skipped)"
status=0
"$SIDECAR_IPC" run --timeout 60 -- "$here/tagger.sh" || status=$?

if ! wait "$server_pid"; then
    server_pid=""
    echo "the prompt server failed; its log:" >&2
    cat "$tmp/prompt-server.log" >&2
    exit 1
fi
server_pid=""

echo "==> decisions persisted by the orchestrator:"
for tags in "$tmp"/tags/*.json; do
    echo "    $(basename "$tags" .json): $(cat "$tags")"
done
echo "==> the audit trail: $(grep -c '"event":"request"' "$tmp/audit.jsonl") prompts, $(grep -c '"event":"clear"' "$tmp/audit.jsonl") clears (replayable with --replay)"
echo "==> run result, as the prompt server read it when /ipc/done appeared:"
cat "$tmp/run-result.json"
exit "$status"
