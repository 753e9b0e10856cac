#!/usr/bin/env bash
# Proof that exec-server/openapi.json and the server agree: schemathesis (PyPI, a third-party API fuzzer) takes
# the document a live server serves at GET /openapi.json (first checked to be the repository's file) and fuzzes
# every operation with every check it has (`--checks all`): no 5xx, replies conform to their schemas (stream events
# included), every status, content type and documented header is right, data the document forbids is refused, data
# it allows is accepted (but a cwd outside the workspace and an offset beyond a stream's end, which no schema can
# rule out: bench/schemathesis_hooks.py), 405 (with Allow) for undocumented methods, auth is not ignored, and a
# stream has one exit frame, last.
# Bounded: SCHEMATHESIS_EXAMPLES examples per operation and phase (default 200), under a minute on 2 cores.
# SCHEMATHESIS_SEED replays a run (each run prints its seed); SCHEMATHESIS_CHECKS and SCHEMATHESIS_EXCLUDE replace
# the checks run and left out; SCHEMATHESIS_ARGS adds options (reports).
#
# The fuzzer invents argv, so the server runs in a throwaway workspace, with a PATH holding only `true`, `echo` and
# `cat`,
# an environment of nothing else, a 2 s --max-timeout, and (when this runs as root) as user nobody.
# Uses EXEC_SERVER_BIN when set, else builds the debug binary. Installs schemathesis into
# target/schemathesis/venv (pip); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="target/schemathesis/venv"
examples="${SCHEMATHESIS_EXAMPLES:-200}"
step() { printf '\n==> %s\n' "$*"; }

step "schemathesis"
if [ ! -x "$venv/bin/schemathesis" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis>=4.1,<5"
fi
"$venv/bin/schemathesis" --version

if [ -z "${EXEC_SERVER_BIN:-}" ]; then
    cargo build -q -p exec-server --locked
    EXEC_SERVER_BIN="target/debug/exec-server"
fi
scratch="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$scratch"
}
trap cleanup EXIT
mkdir -p "$scratch/workspace/sub" "$scratch/bin"
# A copy inside the scratch folder, so that user nobody can run it wherever the checkout is.
cp "$EXEC_SERVER_BIN" "$scratch/exec-server"
ln -s "$(type -P true)" "$scratch/bin/true"
ln -s "$(type -P echo)" "$scratch/bin/echo"
ln -s "$(type -P cat)" "$scratch/bin/cat"
token="fuzz-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$token" >"$scratch/token"
as_user=()
if [ "$(id -u)" = 0 ]; then
    chown -R 65534:65534 "$scratch"
    as_user=("$(command -v setpriv)" --reuid=65534 --regid=65534 --clear-groups --)
fi
chmod 0700 "$scratch"

step "exec-server in $scratch/workspace (PATH: true, echo, cat)"
env -i PATH="$scratch/bin" HOME="$scratch" "${as_user[@]}" "$scratch/exec-server" --host 127.0.0.1 --port 0 \
    --port-file "$scratch/port" --cwd "$scratch/workspace" --token-file "$scratch/token" --max-timeout 2 \
    --grace 1 --max-concurrent 64 --runtime fuzz --log warn 2>"$scratch/server.log" &
server=$!
for _ in $(seq 100); do
    [ -s "$scratch/port" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$scratch/server.log" >&2; exit 1; }
    sleep 0.1
done
[ -s "$scratch/port" ] || { echo "exec-server did not start listening within 10 s" >&2; exit 1; }
port="$(cat "$scratch/port")"
echo "listening on 127.0.0.1:$port"

step "GET /openapi.json is exec-server/openapi.json"
"$venv/bin/python" - "http://127.0.0.1:$port/openapi.json" "$token" "$scratch/openapi.json" <<'PY'
import sys, urllib.request
url, token, path = sys.argv[1:]
request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
with urllib.request.urlopen(request, timeout=10) as response:
    assert response.headers["content-type"] == "application/json", response.headers["content-type"]
    open(path, "wb").write(response.read())
PY
cmp "$scratch/openapi.json" exec-server/openapi.json
echo "same bytes"

step "the named runs the document's examples name (fuzz-stdin with streamed stdin, fuzz-plain without)"
"$venv/bin/python" - "http://127.0.0.1:$port" "$token" <<'PY'
import json, sys, urllib.request
url, token = sys.argv[1:]
def post(path, body):
    request = urllib.request.Request(url + path, data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
# `cat` on the streamed stdin: it echoes a first chunk, then ends at its EOF; both runs stay kept (--retain).
request = urllib.request.Request(url + "/exec/stream", method="POST", headers={"Authorization": f"Bearer {token}"},
                                 data=json.dumps({"cmd": ["cat"], "run_id": "fuzz-stdin", "stdin_stream": True}).encode())
stream = urllib.request.urlopen(request, timeout=10)
assert stream.headers["x-stdin-stream"] == "1", dict(stream.headers)
assert post("/runs/fuzz-stdin/stdin?offset=0", b"hello\n") == {"received": 6, "closed": False}
assert post("/runs/fuzz-stdin/stdin?offset=6&eof=true", b"") == {"received": 6, "closed": True}
frames = [line for line in stream.read().decode().split("\n") if line.startswith("data: ")]
assert json.loads(frames[0][6:])["data"] == "hello" and json.loads(frames[-1][6:])["stdin_consumed"] == 6, frames
post("/exec", json.dumps({"cmd": ["true"], "run_id": "fuzz-plain"}).encode())
print("fuzz-stdin and fuzz-plain are kept")
PY

step "schemathesis run: $examples examples per operation and phase"
# Every check schemathesis has, and ours (schemathesis_hooks.py); positive_data_acceptance through our wrapper, which
# tells it the two refusals of schema-valid data that no schema can rule out (a cwd outside the workspace, an offset
# beyond a stream's end).
checks="${SCHEMATHESIS_CHECKS:-all}"
exclude="${SCHEMATHESIS_EXCLUDE-positive_data_acceptance}"
read -ra extra_args <<<"${SCHEMATHESIS_ARGS:-}"
started=$SECONDS
# From target/schemathesis, where its replay cache and example database land (not in the source tree). One
# worker: with two, hypothesis crashed in CPython 3.11's ast.parse, which is not thread-safe (SystemError "AST
# constructor recursion depth mismatch"), and the server is not what a second worker would measure anyway.
repo="$PWD"
(cd target/schemathesis && PYTHONPATH="$repo/bench" SCHEMATHESIS_HOOKS=schemathesis_hooks venv/bin/schemathesis run \
    "$scratch/openapi.json" --url "http://127.0.0.1:$port" \
    --header "Authorization: Bearer $token" \
    --checks "$checks" ${exclude:+--exclude-checks "$exclude"} \
    --phases examples,coverage,fuzzing \
    --max-examples "$examples" \
    ${SCHEMATHESIS_SEED:+--seed "$SCHEMATHESIS_SEED"} \
    --request-timeout 10 \
    --output-sanitize true \
    --workers 1 "${extra_args[@]}")
echo "schemathesis took $((SECONDS - started)) s"

step "the server is still up and ends cleanly"
kill -0 "$server"
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
if [ "$status" != 0 ] || grep -q panicked "$scratch/server.log"; then
    echo "exec-server exited $status" >&2
    cat "$scratch/server.log" >&2
    exit 1
fi
echo "exit 0, no panic"
