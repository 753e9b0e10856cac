#!/usr/bin/env bash
# The images, for real: builds builder images and the agent image from images/Dockerfile with podman, starts the
# builders on a private network with one shared workspace, waits for their HEALTHCHECK to report healthy, runs
# forwarded commands through the generated wrappers inside the agent container, checks output, exit codes, file
# ownership and the caches, and stops the builders with SIGTERM. Root, Debian bookworm, no Docker engine needed.
#
#   images/test.sh                                   # python and node
#   IMAGES_TEST_RUNTIMES="python node java go" images/test.sh
#
# What differs from a user's `docker build` (see the README, "Images"):
#   - no base image can be pulled here, so every base is a local Debian bookworm made with debootstrap, and each
#     runtime's toolchain comes from Debian's packages (plus PyPI and npm) through images/builder-setup.sh;
#   - no Rust toolchain can be fetched inside a container here, so exec-server and sidecar-exec are built on the host
#     (images/binaries.sh: exec-server against glibc, sidecar-exec static) and passed in with BINARIES=prebuilt
#     instead of the default BINARIES=compiled stage.
#
# Environment: IMAGES_TEST_RUNTIMES (default "python node"), IMAGES_TEST_UID (the caller's uid the containers run
# as, default 2345, deliberately not the image's 1000), IMAGES_TEST_CACHE (debootstrap cache, default
# /var/tmp/sidecar-images-test), IMAGES_TEST_KEEP=1 (leave containers, network and workspace for inspection),
# IMAGES_TEST_BINARIES=compiled (build exec-server and sidecar-exec inside the Dockerfile's default "compiled"
# stage, from a local stand-in for rust:1-bookworm made of the host's rustup toolchain, instead of prebuilt).
# The rust builder uses that same stand-in as its base.
set -euo pipefail
cd "$(dirname "$0")/.."

runtimes="${IMAGES_TEST_RUNTIMES:-python node}"
binaries="${IMAGES_TEST_BINARIES:-prebuilt}"
uid="${IMAGES_TEST_UID:-2345}"
cache="${IMAGES_TEST_CACHE:-/var/tmp/sidecar-images-test}"
base="localhost/sidecar-test-base:bookworm"
prefix="sidecar-test"
started=$(date +%s)

step() { printf '\n==> [%3ss] %s\n' "$(($(date +%s) - started))" "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# runc, not crun ("cgroups in hybrid mode not supported"), and limits no higher than the machine's own.
pm() { podman --runtime runc "$@"; }
# Without systemd, podman cannot arm the HEALTHCHECK timer and says so on every run; the test runs the check itself.
pmq() { pm "$@" 2> >(grep -v -e 'systemd connection' -e 'connect to syslog' >&2); }
ulimits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

[ "$(id -u)" = 0 ] || fail "run as root (podman with the host's network and debootstrap)"

step "tools: podman, runc, debootstrap"
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
podman --version

tmp="$(mktemp -d /tmp/sidecar-images-test.XXXXXX)"
cleanup() {
    status=$?
    if [ "${IMAGES_TEST_KEEP:-0}" = 1 ]; then
        echo "kept: containers $prefix-*, network $prefix, workspace $tmp/workspace" >&2
        return
    fi
    for rt in $runtimes; do pm rm -f -t 0 "$prefix-builder-$rt" >/dev/null 2>&1 || true; done
    pm rm -f -t 0 "$prefix-agent" >/dev/null 2>&1 || true
    pm network rm -f "$prefix" >/dev/null 2>&1 || true
    for rt in $runtimes; do pm volume rm -f "$prefix-cache-$rt" >/dev/null 2>&1 || true; done
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "exec-server and sidecar-exec: release build on the host, as shipped (images/binaries.sh)"
static_bin="$(images/binaries.sh)"
mkdir -p images/dist
install -m 0755 "$static_bin/exec-server" "$static_bin/sidecar-exec" images/dist/

step "local base image $base (debootstrap --variant=minbase bookworm, cached in $cache)"
if ! pm image exists "$base"; then
    rootfs="$cache/rootfs"
    if [ ! -f "$cache/rootfs.done" ]; then
        rm -rf "$rootfs"
        mkdir -p "$cache"
        debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" >"$cache/debootstrap.log" 2>&1 \
            || { tail -20 "$cache/debootstrap.log"; fail "debootstrap"; }
        touch "$cache/rootfs.done"
    fi
    # This machine reaches the registries through a TLS proxy whose CA the host trusts; the local base trusts the
    # same CAs, as a company's own base image would. Nothing of this goes into the Dockerfile.
    if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    bundle=/etc/ssl/certs/ca-certificates.crt
    tar -C "$rootfs" -c . | pm import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change "ENV SSL_CERT_FILE=$bundle" --change "ENV PIP_CERT=$bundle" \
        --change "ENV REQUESTS_CA_BUNDLE=$bundle" --change "ENV NODE_EXTRA_CA_CERTS=$bundle" \
        --change 'CMD ["/bin/bash"]' - "$base" >"$tmp/import.log" 2>&1 || { cat "$tmp/import.log"; fail "podman import"; }
fi

# A stand-in for rust:1-bookworm (no toolchain can be fetched inside a container here): the local base, gcc, and the
# host's rustup toolchain laid out as the official image has it (RUSTUP_HOME=/usr/local/rustup,
# CARGO_HOME=/usr/local/cargo, rustup proxies on PATH). Made only when the rust builder or the compiled path is tested.
rust_base="localhost/sidecar-test-rust:bookworm"
case " $runtimes $binaries " in
    *" rust "* | *" compiled "*)
        step "local stand-in for rust:1-bookworm ($rust_base) from the host's toolchain"
        if ! pm image exists "$rust_base"; then
            ctx="$tmp/rust-base"
            sysroot="$(rustc --print sysroot)"
            mkdir -p "$ctx/toolchain"
            tar -C "$sysroot" --exclude=./share/doc -c . | tar -C "$ctx/toolchain" -x
            cp "$(command -v rustup)" "$ctx/rustup"
            cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $base
RUN apt-get update -q && apt-get install -y -q --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY toolchain /usr/local/rustup/toolchains/stable-x86_64-unknown-linux-gnu
COPY rustup /usr/local/cargo/bin/rustup
RUN printf 'version = "12"\ndefault_toolchain = "stable-x86_64-unknown-linux-gnu"\nprofile = "minimal"\n' >/usr/local/rustup/settings.toml \
    && for p in cargo rustc rustdoc cargo-fmt rustfmt cargo-clippy clippy-driver; do ln /usr/local/cargo/bin/rustup /usr/local/cargo/bin/\$p; done \
    && chmod -R a+w /usr/local/rustup /usr/local/cargo && cargo --version
CONTAINERFILE
            pm build "${ulimits[@]}" -t "$rust_base" "$ctx" >"$tmp/build-rust-base.log" 2>&1 \
                || { tail -30 "$tmp/build-rust-base.log"; fail "building $rust_base"; }
            rm -rf "$ctx"
        fi
        ;;
esac

build() { # build TAG TARGET [build args…]; --format docker keeps HEALTHCHECK (the OCI format has none)
    local tag="$1" target="$2" log
    shift 2
    log="$tmp/build-${tag##*/}.log"
    local t0
    t0=$(date +%s)
    if ! pm build --format docker "${ulimits[@]}" -f images/Dockerfile --target "$target" \
        --build-arg BINARIES="$binaries" --build-arg RUST_IMAGE="$rust_base" "$@" -t "$tag" . >"$log" 2>&1; then
        tail -40 "$log"
        fail "building $tag"
    fi
    echo "    $tag built in $(($(date +%s) - t0)) s"
}

for rt in $runtimes; do
    step "builder image for $rt (base: local bookworm; toolchain from Debian's packages, PyPI and npm)"
    args=(--build-arg RUNTIME="$rt")
    case "$rt" in
        node) args+=(--build-arg NODE_IMAGE="$base") ;;
        # The python builder is built for the caller's uid; the others keep 1000 and run with --user instead.
        python) args+=(--build-arg PYTHON_IMAGE="$base" --build-arg BUILDER_UID="$uid") ;;
        java) args+=(--build-arg JAVA_IMAGE="$base" --build-arg MAVEN_VERSION= --build-arg GRADLE_VERSION=) ;;
        go) args+=(--build-arg GO_IMAGE="$base") ;;
        rust) args+=(--build-arg RUST_RUNTIME_IMAGE="$rust_base") ;;
        *) fail "unknown runtime $rt" ;;
    esac
    build "localhost/sidecar-builder-$rt" builder "${args[@]}"
done
step "agent image (uid $uid)"
build localhost/sidecar-agent agent --build-arg AGENT_IMAGE="$base" --build-arg AGENT_UID="$uid"

step "each builder provides every command of its runtime (the list: sidecar-exec's own wrapper table)"
for rt in $runtimes; do
    # With nothing on PATH the installer writes one wrapper per command of the table: the file names ARE the table.
    BUILD_SIDECARS="{\"$rt\":{\"internal_url\":\"http://unused\"}}" PATH=/nonexistent \
        images/dist/sidecar-exec --install-wrappers "$tmp/table-$rt" 2>/dev/null
    commands=$(cd "$tmp/table-$rt" && ls)
    [ -n "$commands" ] || fail "no commands listed for $rt"
    # shellcheck disable=SC2086,SC2016
    pmq run --rm "${ulimits[@]}" --network none --entrypoint /bin/sh "localhost/sidecar-builder-$rt" -c '
        for c; do p=$(command -v "$c") || { echo "missing: $c" >&2; exit 1; }; printf "    %-8s %s\n" "$c" "$p"; done
    ' sh $commands || fail "the $rt builder lacks a command its wrappers forward"
done

step "private network, shared workspace, token file"
workspace="$tmp/workspace"
install -d -o "$uid" -g "$uid" -m 0755 "$workspace"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 0444 "$tmp/token"
pm network rm -f "$prefix" >/dev/null 2>&1 || true
pm network create "$prefix" >/dev/null
hardening=(--cap-drop ALL --security-opt no-new-privileges)
declare -A cache_dir=([node]=/cache/npm [python]=/cache/pip [java]=/cache/m2 [go]=/cache/go [rust]=/cache/cargo)

sidecars=""
for rt in $runtimes; do
    user=()
    [ "$rt" = python ] || user=(--user "$uid:$uid")   # python runs as its image's builder user (built with $uid)
    pm rm -f -t 0 "$prefix-builder-$rt" >/dev/null 2>&1 || true
    pm volume rm -f "$prefix-cache-$rt" >/dev/null 2>&1 || true
    pmq run -d --name "$prefix-builder-$rt" --network "$prefix" --network-alias "builder-$rt" \
        "${ulimits[@]}" "${hardening[@]}" "${user[@]}" \
        -v "$workspace:/workspace" -v "$tmp/token:/run/secrets/sidecar-token:ro" \
        -v "$prefix-cache-$rt:${cache_dir[$rt]}" \
        -e EXEC_SERVER_TOKEN_FILE=/run/secrets/sidecar-token \
        "localhost/sidecar-builder-$rt" exec-server -port 8080 -cwd /workspace >/dev/null
    sidecars="$sidecars${sidecars:+,}\"$rt\":{\"internal_url\":\"http://builder-$rt:8080\"}"
done
sidecars="{$sidecars}"

step "waiting for every builder's HEALTHCHECK (exec-server -healthcheck) to report healthy"
for rt in $runtimes; do
    name="$prefix-builder-$rt"
    status=""
    for _ in $(seq 1 60); do
        # No systemd timers here: run the image's HEALTHCHECK command the way the engine's timer would.
        pm healthcheck run "$name" >/dev/null 2>&1 || true
        status=$(pm inspect --format '{{.State.Health.Status}}' "$name" 2>/dev/null || true)
        [ "$status" = healthy ] && break
        [ "$(pm inspect --format '{{.State.Running}}' "$name")" = true ] || { pm logs "$name"; fail "$name exited"; }
        sleep 0.5
    done
    [ "$status" = healthy ] || { pm logs "$name"; fail "$name is not healthy ($status)"; }
    pid1=$(pm exec "$name" cat /proc/1/comm)
    [ "$pid1" = tini ] || fail "$name: PID 1 is $pid1, not tini"
    echo "    $name: $status ($(pm inspect --format '{{.Config.Healthcheck.Test}}' "$name")), PID 1 $pid1"
done

step "inside the agent: forwarded commands through the generated wrappers"
echo "    BUILD_SIDECARS=$sidecars"
agent_script=$(cat <<'AGENT'
set -eu
fail() { echo "FAIL (agent): $*" >&2; exit 1; }
expect() { [ "$1" = "$2" ] || fail "$3: expected [$2], got [$1]"; }
code() { set +e; "$@" >/dev/null 2>&1; c=$?; set -e; echo "$c"; }
has() { case " $RUNTIMES " in *" $1 "*) return 0 ;; esac; return 1; }
echo "    agent uid $(id -u), PATH=$PATH"
cd /workspace

if has python; then
    expect "$(command -v python3)" /opt/sidecar/wrappers/python3 "python3 is a wrapper"
    [ ! -e /usr/bin/python3 ] || fail "the agent image has a python of its own"
    expect "$(python3 -c 'import os, sys; print(sys.version_info[0], os.getuid(), os.getcwd())')" "3 $UID_EXPECTED /workspace" "python3 -c"
    python3 -c 'import sys; print("to stdout"); print("to stderr", file=sys.stderr)' >/tmp/out 2>/tmp/err
    expect "$(cat /tmp/out)/$(cat /tmp/err)" "to stdout/to stderr" "stdout and stderr kept apart"
    expect "$(code python3 -c 'raise SystemExit(7)')" 7 "exit code"
    expect "$(SIDECAR_STREAM=1 python3 -c 'print("streamed")')" streamed "streaming mode"
    expect "$(code env SIDECAR_STREAM=1 python3 -c 'raise SystemExit(3)')" 3 "exit code, streaming"
    expect "$(code python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)')" 143 "killed by a signal: 128+N"
    mkdir -p sub && (cd sub && expect "$(python3 -c 'import os; print(os.getcwd())')" /workspace/sub "cwd follows the agent")
    python3 -c 'open("from-python.txt", "w").write("written by the python builder\n")'
    expect "$(cat /workspace/from-python.txt)" "written by the python builder" "file written by the builder"
    pip --version | grep -q '^pip ' || fail "pip --version"
    printf 'def test_sum():\n    assert 1 + 1 == 2\n' >test_agent.py
    pytest -q -p no:cacheprovider test_agent.py | grep -q '1 passed' || fail "pytest on a file the agent wrote"
    for c in poetry ruff black mypy; do "$c" --version >/dev/null || fail "$c --version"; done
    # pip as the non-root caller: HOME and the pip cache (a named volume) are writable, PyPI is reachable.
    pip install -q --user --no-warn-script-location --ignore-installed --no-deps six >/dev/null 2>&1 \
        || pip install --user --ignore-installed --no-deps six || fail "pip install --user six"
    expect "$(python3 -c 'import six; print(six.__name__)')" six "package installed by the builder user"
    expect "$(pip cache dir)" /cache/pip "pip cache folder (a named volume)"
    python3 -c 'open("/cache/pip/written-by-builder", "w").write("ok")' || fail "pip cache volume not writable"
    echo "    python: wrappers, output, exit codes, streaming, cwd, files, pip, pytest, poetry/ruff/black/mypy OK"
fi

if has node; then
    expect "$(command -v node)" /opt/sidecar/wrappers/node "node is a wrapper"
    expect "$(node -e 'console.log(process.version.startsWith("v"), process.getuid(), process.cwd())')" "true $UID_EXPECTED /workspace" "node -e"
    expect "$(code node -e 'process.exit(5)')" 5 "exit code"
    expect "$(SIDECAR_STREAM=1 node -e 'process.stdout.write("no newline")')" "no newline" "streaming, partial line"
    npm --version | grep -Eq '^[0-9]+\.' || fail "npm --version"
    for c in npx pnpm yarn; do "$c" --version >/dev/null || fail "$c --version"; done
    expect "$(npm config get cache)" /cache/npm "npm cache folder"
    mkdir -p nodeproj && cd nodeproj
    npm init -y >/dev/null
    npm install --no-audit --no-fund is-number@7 >/dev/null 2>&1 || npm install --no-audit --no-fund is-number@7
    expect "$(node -e 'console.log(require("is-number")(5))')" true "npm install into the workspace"
    [ -f /workspace/nodeproj/node_modules/is-number/package.json ] || fail "node_modules not in the shared workspace"
    cd /workspace
    node -e 'require("fs").writeFileSync("from-node.txt", "written by the node builder\n")'
    expect "$(cat /workspace/from-node.txt)" "written by the node builder" "file written by the builder"
    echo "    node: wrappers, output, exit codes, streaming, npm/npx/pnpm/yarn, npm install, files OK"
fi

if has java; then
    printf 'public class Hello { public static void main(String[] a) { System.out.println("hello " + a[0]); System.exit(4); } }\n' >Hello.java
    javac Hello.java
    set +e; out=$(java -cp /workspace Hello java); c=$?; set -e
    expect "$out/$c" "hello java/4" "javac + java"
    mvn --version >/dev/null || fail "mvn --version"
    gradle --version >/dev/null 2>&1 || fail "gradle --version"
    echo "    java: javac, java, exit code, mvn, gradle OK"
fi

if has go; then
    mkdir -p goproj && cd goproj
    printf 'package main\nimport "fmt"\nfunc main() { fmt.Println("hello go") }\n' >main.go
    go mod init example.com/hello >/dev/null 2>&1
    expect "$(go run .)" "hello go" "go run"
    gofmt -l . >/dev/null || fail "gofmt"
    cd /workspace
    echo "    go: go mod init, go run, gofmt OK"
fi

if has rust; then
    cargo new --quiet --vcs none rsproj
    cd rsproj
    expect "$(cargo run --quiet)" "Hello, world!" "cargo run"
    rustfmt --check src/main.rs || fail "rustfmt"
    clippy --quiet >/dev/null 2>&1 || fail "clippy"
    rustc --version >/dev/null || fail "rustc --version"
    cd /workspace
    echo "    rust: cargo new/run, rustfmt, clippy, rustc OK"
fi

/opt/sidecar/sidecar-exec --status >/dev/null || fail "sidecar-exec --status"
echo "    agent checks passed"
AGENT
)
pm rm -f -t 0 "$prefix-agent" >/dev/null 2>&1 || true
pmq run --rm -i --name "$prefix-agent" --network "$prefix" "${ulimits[@]}" "${hardening[@]}" \
    -v "$workspace:/workspace" -v "$tmp/token:/run/secrets/sidecar-token:ro" \
    -e BUILD_SIDECARS="$sidecars" -e SIDECAR_TOKEN_FILE=/run/secrets/sidecar-token \
    -e RUNTIMES="$runtimes" -e UID_EXPECTED="$uid" \
    localhost/sidecar-agent /bin/sh -s <<<"$agent_script" || fail "agent checks"

step "files the builders wrote belong to the caller's uid $uid on the host"
for f in "$workspace"/*; do
    owner=$(stat -c %u "$f")
    echo "    uid $owner: ${f#"$workspace"/}"
    [ "$owner" = "$uid" ] || fail "$f belongs to uid $owner, not $uid"
done
for rt in $runtimes; do
    case "$rt" in python | node)   # pip writes a probe there; npm always fills its cache
        dir=$(pm volume inspect --format '{{.Mountpoint}}' "$prefix-cache-$rt")
        [ -n "$(find "$dir" -mindepth 1 -user "$uid" -print -quit)" ] || fail "the $rt cache volume was not used"
        echo "    cache volume for $rt (${cache_dir[$rt]}) filled by uid $uid" ;;
    esac
done

step "sidecar-exec is static: alone in an empty image (FROM scratch: no libc, no NSS) it resolves and reaches a builder"
first="${runtimes%% *}"
mkdir -p "$tmp/scratch"
cp images/dist/sidecar-exec "$tmp/scratch/"
printf 'FROM scratch\nCOPY sidecar-exec /sidecar-exec\nENTRYPOINT ["/sidecar-exec"]\n' >"$tmp/scratch/Containerfile"
pm build -q -t localhost/sidecar-test-scratch "$tmp/scratch" >/dev/null
out=$(pmq run --rm --network "$prefix" "${ulimits[@]}" "${hardening[@]}" --user "$uid:$uid" \
    -v "$tmp/token:/run/secrets/sidecar-token:ro" -e SIDECAR_TOKEN_FILE=/run/secrets/sidecar-token \
    -e BUILD_SIDECARS="$sidecars" -e SIDECAR_CWD=/workspace \
    localhost/sidecar-test-scratch --status) || { echo "$out"; fail "sidecar-exec --status from an empty image"; }
grep -q "builder-$first" <<<"$out" || { echo "$out"; fail "no builder-$first in --status"; }
while IFS= read -r line; do echo "    $line"; done <<<"$out"
pm rmi -f localhost/sidecar-test-scratch >/dev/null 2>&1 || true

step "podman stop: SIGTERM to tini (PID 1), forwarded to exec-server, which exits at once"
for rt in $runtimes; do
    name="$prefix-builder-$rt"
    t0=$(date +%s%N)
    pmq stop -t 10 "$name" >/dev/null
    ms=$((($(date +%s%N) - t0) / 1000000))
    code=$(pm inspect --format '{{.State.ExitCode}}' "$name")
    echo "    $name stopped in $ms ms, exit code $code"
    [ "$ms" -lt 5000 ] || fail "$name took $ms ms to stop: SIGTERM was not handled (the engine waited for SIGKILL)"
    logs=$(pm logs "$name" 2>&1)
    grep -q 'command finished' <<<"$logs" || fail "$name logged no command"
done

step "images OK ($runtimes) in $(($(date +%s) - started)) s"
