#!/bin/bash
# Baseline for the file-IPC latency benchmark: a shell tool executor written from the protocol's description
# (poll every 0.2 s, parse with jq, claim with mkdir, `timeout`, cut output at 51200 bytes, write the result to a
# .tmp file and rename it). It is what exec-server --ipc-dir replaces; it is not used by anything else.
set -euo pipefail

TOOLS_DIR="${1:-/ipc/tools}"
DONE_FILE="${2:-$(dirname "$TOOLS_DIR")/done}"
POLL_INTERVAL=0.2
mkdir -p "$TOOLS_DIR"

run_request() {
    local req="$1" id="$2"
    local result="$TOOLS_DIR/exec-result-$id.json"
    local workdir timeout_sec out err code=0 timed_out=false
    workdir=$(jq -r '.workDir // "/workspace"' "$req")
    timeout_sec=$(jq -r '.timeout // 30' "$req")
    [[ "$timeout_sec" =~ ^[0-9]+$ ]] || timeout_sec=30
    (( timeout_sec < 1 )) && timeout_sec=30
    (( timeout_sec > 120 )) && timeout_sec=120
    out=$(mktemp) err=$(mktemp)
    cd "$workdir" 2>/dev/null || cd /
    if [[ "$(jq -r '(.argv // []) | length' "$req")" -gt 0 ]]; then
        local -a argv
        mapfile -d '' argv < <(jq -j '.argv[] | (., "\u0000")' "$req")
        timeout "$timeout_sec" "${argv[@]}" < <(jq -j '.stdin // ""' "$req") >"$out" 2>"$err" || code=$?
    else
        local command
        command=$(jq -r '[.command // ""] + (.args // []) | join(" ")' "$req")
        timeout "$timeout_sec" bash -c "$command" </dev/null >"$out" 2>"$err" || code=$?
    fi
    [[ $code -eq 124 ]] && timed_out=true
    jq -n --arg id "$id" --argjson exitCode "$code" --argjson timedOut "$timed_out" \
        --rawfile stdout <(head -c 51200 "$out") --rawfile stderr <(head -c 51200 "$err") \
        '{id: $id, exitCode: $exitCode, stdout: $stdout, stderr: $stderr, timedOut: $timedOut}' >"$result.tmp"
    mv "$result.tmp" "$result"
    rm -f "$out" "$err"
}

while true; do
    [[ -f "$DONE_FILE" ]] && exit 0
    for req in "$TOOLS_DIR"/exec-request-*.json; do
        [[ -e "$req" ]] || continue
        id="$(basename "$req" .json)"
        id="${id#exec-request-}"
        [[ -e "$TOOLS_DIR/exec-result-$id.json" ]] && continue
        if [[ -n "${SYMPOZIUM_SKILL_PACK:-}" ]]; then
            target=$(jq -r '.target // ""' "$req" 2>/dev/null | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]' || true)
            self=$(printf '%s' "$SYMPOZIUM_SKILL_PACK" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')
            [[ -n "$target" && "$target" != "$self" ]] && continue
        fi
        mkdir "$TOOLS_DIR/.claim-$id" 2>/dev/null || continue
        run_request "$req" "$id" &
    done
    sleep "$POLL_INTERVAL"
done
