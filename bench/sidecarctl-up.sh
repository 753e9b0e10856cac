#!/usr/bin/env bash
# Time from `sidecarctl up` to the agent's first command, with two warm builder images (python, node), on each
# engine: a real Docker Engine and Podman's Docker-API service.
# `sidecarctl up --sidecar python --sidecar node -- sidecar-agent sh -c 'date +%s.%N'`; the agent's `date` is its
# first command (after the image's entrypoint has installed the wrappers). Also the whole run, teardown included, and
# the baseline measured in the same run on the same engine: `up --disable-sidecars` (the agent alone), so the ratio
# is what the builders and the health gate add.
# Writes (replaces) the "sidecarctl up" section of BENCHMARKS.md. Needs root and the images images/test.sh builds on
# each engine. Docker: SIDECAR_TEST_DOCKER_HOST, else a private dockerd (images/dockerd.sh) started and stopped here.
# Podman: a private `podman system service` (runc) in a temporary folder, with the explicit ulimits podman needs on
# hosts that may not raise limits. BENCH_UP_RUNS (default 7) runs per measure after one warm-up; the engines and
# measures take turns, run by run, so a change in the machine's load reaches all of them alike.
# BENCH_UP_ENGINES (default "docker podman").
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${BENCH_UP_RUNS:-7}"
engines="${BENCH_UP_ENGINES:-docker podman}"
cargo build -q -p sidecarctl --locked
bin="$PWD/target/debug/sidecarctl"
tmp="$(mktemp -d)"
service=""
dockerd_dir=""
cleanup() {
    [ -z "$service" ] || { kill "$service" 2>/dev/null || true; wait "$service" 2>/dev/null || true; }
    [ -z "$dockerd_dir" ] || images/dockerd.sh stop "$dockerd_dir" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
declare -A host limits
for engine in $engines; do
    case "$engine" in
        docker)
            if [ -n "${SIDECAR_TEST_DOCKER_HOST:-}" ]; then
                host[docker]="$SIDECAR_TEST_DOCKER_HOST"
            else
                dockerd_dir="$tmp/dockerd"
                host[docker]="$(images/dockerd.sh start "$dockerd_dir")"
            fi
            limits[docker]=""
            ;;
        podman)
            podman --runtime runc system service --time=0 "unix://$tmp/podman.sock" >/dev/null 2>&1 &
            service=$!
            host[podman]="unix://$tmp/podman.sock"
            # Ready when the API answers (the service writes no ready line).
            for _ in $(seq 1 300); do
                [ "$(curl -s --max-time 2 --unix-socket "$tmp/podman.sock" http://localhost/_ping 2>/dev/null)" = OK ] && break
                sleep 0.1
            done
            limits[podman]="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096"
            ;;
        *) echo "bench: unknown engine $engine (docker, podman)" >&2; exit 1 ;;
    esac
done
mkdir "$tmp/ws"
# up ENGINE MEASURE: one run; prints the agent's first line (its `date`).
up() {
    local sidecars=(--sidecar python --sidecar node)
    [ "$2" = builders ] || sidecars=(--disable-sidecars)
    # shellcheck disable=SC2086 # (the limits are words)
    DOCKER_HOST="${host[$1]}" "$bin" up ${limits[$1]} --workspace "$tmp/ws" "${sidecars[@]}" -- \
        sidecar-agent sh -c 'date +%s.%N' 2>"$tmp/stderr"
}
load_before="$(cut -d' ' -f1 /proc/loadavg)"
: >"$tmp/samples"
for engine in $engines; do
    for measure in builders agent-alone; do
        up "$engine" "$measure" >/dev/null || { cat "$tmp/stderr" >&2; exit 1; }   # warm-up, not counted
    done
done
for _ in $(seq 1 "$runs"); do
    for engine in $engines; do
        for measure in builders agent-alone; do
            start=$(date +%s.%N)
            first=$(up "$engine" "$measure") || { cat "$tmp/stderr" >&2; exit 1; }
            # The agent's one line, its `date`: anything else is a broken sample, shown rather than counted.
            [[ "$first" =~ ^[0-9]+\.[0-9]+$ ]] || {
                printf 'bench: %s %s: the agent printed %q, not its date\n' "$engine" "$measure" "$first" >&2
                cat "$tmp/stderr" >&2
                exit 1
            }
            end=$(date +%s.%N)
            gate=$(sed -n 's/.*agent starting (\([0-9.]*\)s after up).*/\1/p' "$tmp/stderr")
            echo "$engine $measure $start $first $end ${gate:-0}" >>"$tmp/samples"
        done
    done
done
versions="$(for engine in $engines; do
    DOCKER_HOST="${host[$engine]}" /usr/bin/docker version --format "$engine {{.Server.Version}} (API {{.Server.APIVersion}})" 2>/dev/null \
        || echo "$engine"
done | paste -sd ';' | sed 's/;/, /g')"
load="load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after, on $(nproc) cores"
python3 - "$tmp/samples" "$runs" "$versions" "$load" <<'PY'
import re, statistics, sys, textwrap
from collections import defaultdict
samples = defaultdict(list)
for line in open(sys.argv[1]):
    engine, measure, start, first, end, gate = line.split()
    samples[(engine, measure)].append((float(first) - float(start), float(end) - float(start), float(gate)))
med = statistics.median
def cell(values):
    values = sorted(values)
    return f"{med(values):.2f} s ({values[0]:.2f}–{values[-1]:.2f})"
engines = list(dict.fromkeys(engine for engine, _ in samples))
rows = []
goals = []
added = []
for engine in engines:
    b, a = samples[(engine, "builders")], samples[(engine, "agent-alone")]
    first, alone = [s[0] for s in b], [s[0] for s in a]
    rows.append(f"| {engine} | {cell(first)} | {cell([s[2] for s in b])} | {cell([s[1] for s in b])} | "
                f"{cell(alone)} | {med(first) / med(alone):.2f}× |")
    goals.append(f"{engine} {'met' if med(first) < 3 else 'NOT met'}")
    added.append(f"{engine} +{med(first) - med(alone):.2f} s of {med(first):.2f} s")
added_text = textwrap.fill(
    "What the builders and the health gate add (the median to the first command less the baseline's): "
    f"{', '.join(added)}; the rest is the engine starting one container (the agent alone).",
    width=116, break_long_words=False, break_on_hyphens=False)
# The setup paragraph, wrapped as the rest of the file (its figures change its length from run to run).
setup = textwrap.fill(
    f"`sidecarctl up --sidecar python --sidecar node -- sidecar-agent sh -c 'date +%s.%N'` on each engine, "
    f"{sys.argv[3]} (podman with runc, through its API socket), images warm, {sys.argv[2]} runs per measure after "
    "one warm-up, the engines and measures taking turns; written by bench/sidecarctl-up.sh (debug build of "
    f"sidecarctl: the time is the engine's, not the client's); {sys.argv[4]}. Baseline, measured in the same run on "
    "the same engine: `up --disable-sidecars`, the agent alone. Median (min–max).",
    width=116, break_long_words=False, break_on_hyphens=False)
section = f"""## sidecarctl up

{setup}

| engine | `up` → the agent's first command | `up` → agent created (network, 2 builders, health gate passed) | whole run, teardown included | baseline: agent alone, `up` → first command | ratio |
| --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}

Goal: under 3 s to the first command, and no fixed 2 s from the health gate when the builders are healthy at
once: {", ".join(goals)}.

{added_text}
"""
path = "BENCHMARKS.md"
text = open(path).read()
pattern = re.compile(r"## sidecarctl up\n.*?(?=\n## |\Z)", re.S)
text = pattern.sub(section.rstrip("\n") + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
print(section)
PY
