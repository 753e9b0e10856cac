#!/usr/bin/env bash
# The images, for real, on both engines: builds the builder images and the agent image from images/Dockerfile with
# podman and with Docker (a real Docker Engine, `docker build` as docs/images.md says), starts the builders on a
# private podman network with one shared workspace, waits for their HEALTHCHECK to report healthy, runs forwarded
# commands through the generated wrappers inside the agent container, checks output, exit codes, file ownership and
# the caches, stops everything with SIGTERM, and runs images/compose.yaml as its header says with docker-compose on
# Docker and on podman's API. Root, Debian bookworm; installs what it needs (podman, runc, catatonit, docker.io,
# debootstrap, docker-compose).
#
#   images/test.sh                                   # python and node
#   IMAGES_TEST_RUNTIMES="python node java go" images/test.sh
#   IMAGES_TEST_ENGINES=podman images/test.sh        # one engine only (default "podman docker")
#
# What differs from a user's `docker build` (see docs/images.md, "What was run"): no base image can be pulled here,
# so it builds the way docs/images.md, "Building without a registry", says: `sidecarctl image base` makes a local
# Debian bookworm (debootstrap) on each engine, and `sidecarctl image build --base` builds every image on it, each
# runtime's toolchain from Debian's packages (plus PyPI and npm) through images/builder-setup.sh, and exec-server and
# sidecar-exec built on the host (images/binaries.sh --dist, run by sidecarctl) and passed in with BINARIES=prebuilt.
# On top of that, node gets a stand-in for node:22-bookworm-slim made of the host's Node.js (node, npm, corepack,
# yarn 1 at /usr/local as the official image has them) when the host has node and corepack (`--build-arg
# NODE_IMAGE=`, the mirror form), so corepack is tested too.
#
# Runs at once on one host do not meet: this run's containers, network and volumes carry a unique name
# (sidecar-test-<id>-…), and it runs its containers from the image ids it built. The images' tags
# (localhost/sidecar-builder-<runtime>, localhost/sidecar-agent), the local bases and podman's layer cache are shared
# and stay after the run, so the next run is fast; so does debootstrap's package cache. The last step lists them with their
# size and the commands that remove them. On Docker the same holds in the data root of the private dockerd it starts
# (images/dockerd.sh, /var/tmp/sidecar-docker), or of the one SIDECAR_TEST_DOCKER_HOST names (CI's).
#
# Where the time goes: each step's line starts with the seconds since the start, and the last lines list the time of
# every phase (also when a step fails).
#
# Environment: IMAGES_TEST_RUNTIMES (default "python node"), IMAGES_TEST_UID (the caller's uid the containers run
# as, default 2345, deliberately not the image's 1000), IMAGES_TEST_OTHER_UID (a second caller reusing a cache
# volume, default 3456), IMAGES_TEST_CACHE (debootstrap's package cache and the lock, default /var/tmp/sidecar-images-test),
# IMAGES_TEST_KEEP=1 (leave containers, network and workspace for inspection), IMAGES_TEST_BINARIES=compiled (build
# exec-server and sidecar-exec inside the Dockerfile's default "compiled" stage, from a local stand-in for
# rust:1-bookworm made of the host's rustup toolchain, instead of prebuilt). The rust builder uses that same
# stand-in as its base. SIDECAR_TEST_DOCKER_HOST: a running Docker Engine to build on (unix://…), instead of a
# private dockerd started and stopped by this run.
set -euo pipefail
cd "$(dirname "$0")/.."

runtimes="${IMAGES_TEST_RUNTIMES:-python node}"
engines="${IMAGES_TEST_ENGINES:-podman docker}"
[[ " $engines " == *" podman "* ]] || { echo "IMAGES_TEST_ENGINES must hold podman (the container checks run on it): $engines" >&2; exit 1; }
binaries="${IMAGES_TEST_BINARIES:-prebuilt}"
uid="${IMAGES_TEST_UID:-2345}"
other_uid="${IMAGES_TEST_OTHER_UID:-3456}"
cache="${IMAGES_TEST_CACHE:-/var/tmp/sidecar-images-test}"
base="localhost/sidecar-base:bookworm"   # `sidecarctl image base`'s own name
started=$(date +%s)

# Each step is a phase: its time is what passes until the next step (or the end).
phases=()
phase_name=""
phase_start=$started
step() {
    local now
    now=$(date +%s)
    [ -z "$phase_name" ] || phases+=("$(printf '%5s s  %s' "$((now - phase_start))" "$phase_name")")
    phase_name="$1"
    phase_start=$now
    printf '\n==> [%3ss] %s\n' "$((now - started))" "$*"
}
phase_summary() {
    step "(end)"
    echo "time per phase (seconds, $(($(date +%s) - started)) s in all):"
    printf '    %s\n' "${phases[@]}"
}
has_engine() { [[ " $engines " == *" $1 "* ]]; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# runc, not crun ("cgroups in hybrid mode not supported"), and limits no higher than the machine's own.
pm() { podman --runtime runc "$@"; }
# Without systemd, podman cannot arm the HEALTHCHECK timer and says so on every run; the test runs the check itself.
pmq() { pm "$@" 2> >(grep -v -e 'systemd connection' -e 'connect to syslog' >&2); }
ulimits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

[ "$(id -u)" = 0 ] || fail "run as root (podman with the host's network and debootstrap)"

step "tools: podman, runc, catatonit, docker.io, debootstrap, docker-compose"
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
# podman's container init (`--init`, compose's `init: true`). Debian's podman only recommends it, and docker.io's
# tini satisfies that recommendation, so a host with Docker lacks it: "container-init binary not found on the host".
[ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v docker-compose >/dev/null || need+=(docker-compose)   # runs images/compose.yaml (Debian's, 1.29)
# Debian's Docker Engine (dockerd 20.10) and its CLI, whose BuildKit client is built in (DOCKER_BUILDKIT=1).
if has_engine docker && [ -z "${SIDECAR_TEST_DOCKER_HOST:-}" ]; then command -v dockerd >/dev/null || need+=(docker.io); fi
if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
podman --version

tmp="$(mktemp -d /tmp/sidecar-images-test.XXXXXX)"
chmod 0755 "$tmp"   # the containers' users read the token and the workspace below it
# This run's names: containers, network and volumes. Unique per run, so two runs on one host never meet.
prefix="sidecar-test-$(tr '[:upper:]' '[:lower:]' <<<"${tmp##*.}")"
label="sidecar-images-test=$prefix"
marker=""
api_pid=""       # the podman API service the compose step talks to
build_api_pid="" # the podman API service sidecarctl builds on
docker_host=""   # the Docker Engine this run builds on (unix://…)
dockerd_dir=""   # set when this run started that engine itself (images/dockerd.sh), which it then stops
cleanup() {
    status=$?
    trap - EXIT
    step "cleanup: this run's containers, networks and volumes${dockerd_dir:+, the dockerd it started}"
    [ -z "$api_pid" ] || { kill "$api_pid" 2>/dev/null; wait "$api_pid" 2>/dev/null || true; }
    [ -z "$build_api_pid" ] || { kill "$build_api_pid" 2>/dev/null; wait "$build_api_pid" 2>/dev/null || true; }
    # shellcheck disable=SC2086
    [ -z "$marker" ] || rm -f $marker
    if [ "${IMAGES_TEST_KEEP:-0}" = 1 ]; then
        echo "kept: containers and volumes labelled $label, network $prefix, workspace $tmp/clone/images/workspace" >&2
        [ -z "$dockerd_dir" ] || echo "kept: dockerd at $docker_host (images/dockerd.sh stop $dockerd_dir)" >&2
        phase_summary
        return
    fi
    for id in $(podman ps -aq --filter "label=$label" 2>/dev/null); do pm rm -f -t 0 "$id" >/dev/null 2>&1 || true; done
    for net in "$prefix" "${prefix}_builders"; do pm network rm -f "$net" >/dev/null 2>&1 || true; done
    for id in $(podman volume ls -q --filter "label=$label" 2>/dev/null); do pm volume rm -f "$id" >/dev/null 2>&1 || true; done
    if [ -n "$docker_host" ]; then
        for id in $(dk ps -aq --filter "label=$label" 2>/dev/null); do dk rm -f "$id" >/dev/null 2>&1 || true; done
        for net in "$prefix" "${prefix}_builders"; do dk network rm "$net" >/dev/null 2>&1 || true; done
        for id in $(dk volume ls -q --filter "label=$label" 2>/dev/null); do dk volume rm -f "$id" >/dev/null 2>&1 || true; done
    fi
    [ -z "$dockerd_dir" ] || images/dockerd.sh stop "$dockerd_dir" || status=1
    rm -rf "$tmp"
    phase_summary
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Docker builds with BuildKit or not at all: the Dockerfile's cache mounts and COPY --chmod need it. A CLI with the
# buildx plugin has it; one of 23 or later without buildx (the machine's v28 here) falls back to the legacy builder,
# which cannot build the file; Debian's 20.10 CLI (/usr/bin/docker) has BuildKit built in, with DOCKER_BUILDKIT=1.
docker_cli=""
dk() { DOCKER_HOST="$docker_host" DOCKER_BUILDKIT=1 "$docker_cli" "$@"; }
if has_engine docker; then
    step "Docker: the engine (${SIDECAR_TEST_DOCKER_HOST:-a private dockerd, images/dockerd.sh}) and a CLI with BuildKit"
    if docker buildx version >/dev/null 2>&1; then
        docker_cli=docker
    elif [ -x /usr/bin/docker ] && [ "$(/usr/bin/docker version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)" -lt 23 ]; then
        docker_cli=/usr/bin/docker
    else
        fail "no Docker CLI here builds with BuildKit: install the buildx plugin, or Debian's docker.io (its 20.10 CLI)"
    fi
    if [ -n "${SIDECAR_TEST_DOCKER_HOST:-}" ]; then
        docker_host="$SIDECAR_TEST_DOCKER_HOST"
    else
        dockerd_dir="$tmp/dockerd"
        docker_host="$(images/dockerd.sh start "$dockerd_dir")"
    fi
    echo "    $docker_host: Docker Engine $(dk version --format '{{.Server.Version}} (API {{.Server.APIVersion}})');" \
        "CLI $docker_cli $(dk version --format '{{.Client.Version}}')"
fi

step "sidecarctl (cargo build), which builds the images; podman's API service for it"
cargo build --quiet --locked -p sidecarctl
sidecarctl="${CARGO_TARGET_DIR:-$PWD/target}/debug/sidecarctl"
# sidecarctl talks to podman through its API, as `up` does: a service of this run's own (podman itself, not the pm
# function: $! must be podman's pid for the cleanup's kill).
podman --runtime runc system service --time=0 "unix://$tmp/podman-build.sock" >"$tmp/podman-build.log" 2>&1 &
build_api_pid=$!
for _ in $(seq 1 300); do
    [ "$(curl -s --max-time 2 --unix-socket "$tmp/podman-build.sock" http://localhost/_ping 2>/dev/null)" = OK ] && break
    sleep 0.1
done
declare -A engine_url=([podman]="unix://$tmp/podman-build.sock" [docker]="$docker_host")
echo "    $sidecarctl; podman at ${engine_url[podman]}"

# The two engines' CLIs, for what both do alike (podman's with runc and the limits it may set).
on() { # on ENGINE ARGS…
    local engine="$1"
    shift
    case "$engine" in
        podman) pm "$@" ;;
        docker) dk "$@" ;;
    esac
}
image_exists() { on "$1" image inspect "$2" >/dev/null 2>&1; }
# context_build ENGINE TAG FOLDER: a local stand-in image from FOLDER/Containerfile.
context_build() {
    local limits=()
    [ "$1" != podman ] || limits=("${ulimits[@]}")
    on "$1" build "${limits[@]}" -f "$3/Containerfile" -t "$2" "$3" >"$tmp/build-$1-${2//[:\/]/_}.log" 2>&1 \
        || { tail -30 "$tmp/build-$1-${2//[:\/]/_}.log"; fail "building $2 on $1"; }
}

# The local bases are shared by every run on this host: one run makes them while a concurrent one waits.
mkdir -p "$cache"
exec {lock}>"$cache/lock"
flock "$lock"
step "local base image $base (sidecarctl image base: debootstrap bookworm, packages cached in $cache/debootstrap) on $engines"
for engine in $engines; do
    image_exists "$engine" "$base" && { echo "    on $engine: there already"; continue; }
    t0=$(date +%s)
    "$sidecarctl" image base --engine "${engine_url[$engine]}" --cache-dir "$cache/debootstrap" >"$tmp/base-$engine.log" 2>&1 \
        || { tail -30 "$tmp/base-$engine.log"; fail "sidecarctl image base on $engine"; }
    echo "    on $engine: made in $(($(date +%s) - t0)) s"
done

# A stand-in for rust:1-bookworm (no toolchain can be fetched inside a container here): the local base, gcc, and the
# host's rustup toolchain laid out as the official image has it (RUSTUP_HOME=/usr/local/rustup,
# CARGO_HOME=/usr/local/cargo, rustup proxies on PATH). Made only when the rust builder or the compiled path is tested.
rust_base="localhost/sidecar-test-rust:bookworm"
case " $runtimes $binaries " in
    *" rust "* | *" compiled "*)
        step "local stand-in for rust:1-bookworm ($rust_base) from the host's toolchain"
        for engine in $engines; do
            image_exists "$engine" "$rust_base" && continue
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
            context_build "$engine" "$rust_base" "$ctx"
            rm -rf "$ctx"
        done
        ;;
esac

# A stand-in for node:22-bookworm-slim when the host has Node.js with corepack: the official image's layout (node,
# npm, npx and corepack in /usr/local, yarn 1 installed globally) from the host's files, so the node builder is built
# the way a user's is: corepack enabled over an existing yarn, pnpm and yarn pinned through it. Without it, node and
# npm come from Debian's packages (no corepack) and the packageManager check is skipped.
node_base=""
if [[ " $runtimes " == *" node "* ]] && command -v node >/dev/null && command -v corepack >/dev/null; then
    # Two settings for the registry these machines reach, which is the only way out (like the base's CA
    # certificates, nothing of this goes into the Dockerfile): it serves package metadata without npm's signatures,
    # which corepack verifies (COREPACK_INTEGRITY_KEYS=0; the sha512 integrity is still checked), and corepack
    # fetches Yarn 2+ from repo.yarnpkg.com unless told to use the npm registry: the one this machine's npm is
    # configured with, read now (npm config get registry), so the stand-in follows the machine, not this file.
    npm_registry="$(npm config get registry 2>/dev/null || true)"
    npm_registry="${npm_registry%/}"
    case "$npm_registry" in
        http://* | https://*) ;;
        *) fail "npm config get registry gave '$npm_registry', not a registry's URL: set one (npm config set registry URL)" ;;
    esac
    containerfile="FROM $base
ARG NPM_REGISTRY
ENV COREPACK_INTEGRITY_KEYS=0 COREPACK_NPM_REGISTRY=\${NPM_REGISTRY}
COPY node /usr/local/bin/node
COPY node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
    && ln -s ../lib/node_modules/corepack/dist/corepack.js /usr/local/bin/corepack \\
    && npm install -g --cache /tmp/npm-cache --no-fund --no-audit --no-update-notifier yarn@1.22.22 \\
    && rm -rf /tmp/npm-cache && node --version && corepack --version && yarn --version
"
    # Tagged with the host's Node.js version, this recipe and the registry, so a change to any makes a new stand-in.
    node_base="localhost/sidecar-test-node:$(node --version | tr -d v)-$(sha256sum <<<"$containerfile$npm_registry" | cut -c1-8)"
    step "local stand-in for node:22-bookworm-slim ($node_base) from the host's Node.js (registry $npm_registry)"
    for engine in $engines; do
        image_exists "$engine" "$node_base" && continue
        ctx="$tmp/node-base"
        modules="$(dirname "$(readlink -f "$(command -v corepack)")")/../.."
        mkdir -p "$ctx/node_modules"
        cp "$(readlink -f "$(command -v node)")" "$ctx/node"
        cp -a "$modules/npm" "$modules/corepack" "$ctx/node_modules/"
        printf '%s' "$containerfile" >"$ctx/Containerfile"
        # (the registry as a build argument: the generated file names none)
        limits=()
        [ "$engine" != podman ] || limits=("${ulimits[@]}")
        on "$engine" build "${limits[@]}" --build-arg NPM_REGISTRY="$npm_registry" -f "$ctx/Containerfile" \
            -t "$node_base" "$ctx" >"$tmp/build-node-base.log" 2>&1 \
            || { tail -30 "$tmp/build-node-base.log"; fail "building $node_base on $engine"; }
        rm -rf "$ctx"
    done
fi
flock -u "$lock"

declare -A image          # podman: runtime (or "agent") -> the id of the image this run built
declare -A docker_image   # the same on Docker (compose_example reads both through a nameref)
# build ENGINE NAME [build args…]: `sidecarctl image build --base "$base" NAME` (NAME: a runtime or agent), as
# docs/images.md, "Building without a registry", gives it, tagged with this run's own tag so that the id read back is
# this run's build (a concurrent run may retag the shared one), then tagged as `up` names the images
# (sidecar-builder-RT, sidecar-agent: :latest) and the run's tag removed.
build() {
    local engine="$1" name="$2" log t0 cached repo
    shift 2
    log="$tmp/build-$engine-$name.log"
    t0=$(date +%s)
    repo="sidecar-builder-$name"
    [ "$name" != agent ] || repo=sidecar-agent
    local extra=()
    [ "$binaries" != compiled ] || extra=(--build-arg BINARIES=compiled --build-arg RUST_IMAGE="$rust_base")
    if ! "$sidecarctl" image build --engine "${engine_url[$engine]}" --base "$base" --tag "$prefix" "${extra[@]}" "$@" \
        "$name" >"$log" 2>&1; then
        tail -40 "$log"
        fail "building $repo on $engine"
    fi
    local id
    id=$(on "$engine" image inspect --format '{{.Id}}' "$repo:$prefix")
    on "$engine" tag "$id" "$repo:latest"
    on "$engine" rmi "$repo:$prefix" >/dev/null
    # shellcheck disable=SC2034
    case "$engine" in
        podman) image[$name]="$id" ;;
        docker) docker_image[$name]="$id" ;;
    esac
    cached=$(grep -c -e 'Using cache' -e ' CACHED$' "$log" || true)
    echo "    $repo on $engine built in $(($(date +%s) - t0)) s (cached steps: $cached)"
}

for engine in $engines; do
    for rt in $runtimes; do
        step "builder image for $rt on $engine"
        args=()
        case "$rt" in
            node) [ -z "$node_base" ] || args+=(--build-arg NODE_IMAGE="$node_base") ;;
            # The python builder is built for the caller's uid; the others keep 1000 and run with --user instead.
            python) args+=(--build-arg BUILDER_UID="$uid") ;;
            java | go) ;;
            rust) args+=(--build-arg RUST_RUNTIME_IMAGE="$rust_base") ;;
            *) fail "unknown runtime $rt" ;;
        esac
        build "$engine" "$rt" "${args[@]}"
        [ -x images/dist/exec-server ] || fail "image build --base left no images/dist/exec-server"
    done
    step "agent image (uid $uid) on $engine"
    build "$engine" agent --build-arg AGENT_UID="$uid" --build-arg AGENT_GID="$uid"
done

step "a build after touching a workspace file reuses the compiled stage (only manifests and crates are its inputs)"
# Two new files in the build context: one in compose's default workspace (images/workspace, which .dockerignore
# leaves out) and one beside the Dockerfile (in the context, but no input of the compiled stage).
[ -d images/workspace ] || { mkdir images/workspace; made_workspace=1; }
markers=("images/workspace/.images-test-$prefix" "images/.images-test-$prefix")
touch_markers() { for m in "${markers[@]}"; do date +%s%N >"$m"; done; }
marker="${markers[*]}"
if [ "$binaries" = compiled ]; then
    # The real stage: its cargo build must come from the cache.
    touch_markers
    # (the compiled stage alone, which sidecarctl has no name for: podman build, as the stage's own check)
    pm build --format docker "${ulimits[@]}" -f images/Dockerfile --target compiled --build-arg RUST_IMAGE="$rust_base" \
        -t sidecar-compiled-check . >"$tmp/build-compiled-check.log" 2>&1 \
        || { tail -40 "$tmp/build-compiled-check.log"; fail "building the compiled stage"; }
    cargo_step=$(grep -A1 -E '^(\[[0-9/]+\] )?STEP [0-9/]+: RUN .*cargo build' "$tmp/build-compiled-check.log")
    grep -q 'Using cache' <<<"$cargo_step" \
        || { cat "$tmp/build-compiled-check.log"; fail "new files in the context reran the compiled stage's cargo build"; }
    echo "    the cargo build step: Using cache"
else
    # The stage's inputs (everything before its cargo build) on the local base, built without and with the new
    # files: every step must come from the cache, so the cargo build after them would too.
    awk -v base="$base" '/^FROM \$\{RUST_IMAGE\} AS compiled/ { on = 1; print "FROM " base; next }
                         on && /^(RUN|FROM) / { exit } on { print }' images/Dockerfile >"$tmp/Containerfile.compiled-inputs"
    grep -q '^COPY ' "$tmp/Containerfile.compiled-inputs" || fail "no COPY found in the compiled stage"
    inputs() {
        pm build --format docker "${ulimits[@]}" -f "$tmp/Containerfile.compiled-inputs" \
            -t localhost/sidecar-test-compiled-inputs . >"$tmp/build-inputs-$1.log" 2>&1 \
            || { cat "$tmp/build-inputs-$1.log"; fail "building the compiled stage's inputs"; }
    }
    inputs before
    touch_markers
    inputs after
    steps=$(($(grep -cE '^(\[[0-9/]+\] )?STEP' "$tmp/build-inputs-after.log") - 1))
    cached=$(grep -c 'Using cache' "$tmp/build-inputs-after.log")
    [ "$cached" -eq "$steps" ] \
        || { cat "$tmp/build-inputs-after.log"; fail "new files changed the compiled stage's inputs ($cached of $steps steps cached)"; }
    echo "    all $steps steps after FROM from the cache (IMAGES_TEST_BINARIES=compiled checks the cargo build itself)"
fi
rm -f "${markers[@]}"
marker=""
[ -z "${made_workspace:-}" ] || rmdir images/workspace 2>/dev/null || true   # (a concurrent run may still use it)

step "each builder provides every command of its runtime (the list: sidecar-exec's own wrapper table)"
for rt in $runtimes; do
    # With nothing on PATH the installer writes one wrapper per command of the table: the file names ARE the table.
    BUILD_SIDECARS="{\"$rt\":{\"internal_url\":\"http://unused\"}}" PATH=/nonexistent \
        images/dist/sidecar-exec --install-wrappers "$tmp/table-$rt" 2>/dev/null
    commands=$(cd "$tmp/table-$rt" && ls)
    [ -n "$commands" ] || fail "no commands listed for $rt"
    # shellcheck disable=SC2086,SC2016
    pmq run --rm "${ulimits[@]}" --network none --entrypoint /bin/sh "${image[$rt]}" -c '
        for c; do p=$(command -v "$c") || { echo "missing: $c" >&2; exit 1; }; printf "    %-8s %s\n" "$c" "$p"; done
    ' sh $commands || fail "the $rt builder lacks a command its wrappers forward"
done

declare -A cache_dir=([node]=/cache/npm [python]=/cache/pip [java]=/cache/m2 [go]=/cache/go [rust]=/cache/cargo)
step "builder image: modes of /workspace, HOME and the caches; the entrypoint's umask and its chain to a base entrypoint"
printf '#!/bin/sh\nexport CHAINED=yes\nexec "$@"\n' >"$tmp/base-entrypoint.sh"
chmod 0755 "$tmp/base-entrypoint.sh"
for rt in $runtimes; do
    # shellcheck disable=SC2016
    out=$(pmq run --rm "${ulimits[@]}" --network none --user "$uid:$uid" \
        -v "$tmp/base-entrypoint.sh:/opt/base-entrypoint.sh:ro" -e SIDECAR_BASE_ENTRYPOINT=/opt/base-entrypoint.sh \
        "${image[$rt]}" sh -c 'stat -c "%a %n" /workspace /home/builder /cache "$1"; echo "chained=${CHAINED:-no} umask=$(umask)"' \
        sh "${cache_dir[$rt]}")
    want="1777 /workspace
1777 /home/builder
1777 /cache
2777 ${cache_dir[$rt]}
chained=yes umask=0002"
    [ "$out" = "$want" ] || fail "$rt builder: expected
$want
got
$out"
    echo "    $rt: $(tr '\n' ' ' <<<"$out")"
done

step "builder-setup.sh refuses a base whose glibc is older than exec-server needs"
# shellcheck disable=SC2016
if out=$(pmq run --rm "${ulimits[@]}" --network none -v "$PWD/images/builder-setup.sh:/setup.sh:ro" "$base" sh -c '
    mkdir /tmp/fake && printf "#!/bin/sh\necho glibc 2.31\n" >/tmp/fake/getconf && chmod +x /tmp/fake/getconf
    PATH=/tmp/fake:$PATH sh /setup.sh python' 2>&1); then
    fail "builder-setup.sh accepted glibc 2.31: $out"
fi
grep -q 'glibc 2.31: exec-server needs glibc 2.34 or later' <<<"$out" || fail "unclear message: $out"
echo "    ${out#builder-setup: }"

step "exec-server warns when the workspace is not writable by its uid (a bind source the engine made as root)"
install -d -m 0755 "$tmp/root-owned"
first="${runtimes%% *}"
if out=$(pm run --rm "${ulimits[@]}" --network none --user "$uid:$uid" -v "$tmp/root-owned:/workspace" \
    "${image[$first]}" exec-server -port 0 --token-file /nonexistent 2>&1); then
    fail "exec-server started with a missing token file"
fi
grep -q "the workspace /workspace is not writable by uid $uid" <<<"$out" || fail "no warning: $out"
echo "    $(grep -o 'the workspace /workspace is not writable by uid [0-9]* ([^)]*)' <<<"$out")"

step "private network; the workspace created by the documented step (mkdir as the caller); token file"
# As a user does it: their clone, and `mkdir -p images/workspace` run as them, before the containers start.
install -d -o "$uid" -g "$uid" -m 0755 "$tmp/clone"
setpriv --reuid="$uid" --regid="$uid" --clear-groups mkdir -p "$tmp/clone/images/workspace"
workspace="$tmp/clone/images/workspace"
echo "    $(stat -c 'uid %u gid %g mode %a' "$workspace"): $workspace"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 0444 "$tmp/token"
pm network create --label "$label" "$prefix" >/dev/null
hardening=(--cap-drop ALL --security-opt no-new-privileges)

# The first builder gets its port only on its command line (`docker run IMAGE exec-server -port 9000`): its
# HEALTHCHECK must find it all the same.
declare -A port
sidecars=""
for rt in $runtimes; do
    port[$rt]=8080
    [ "$rt" != "$first" ] || port[$rt]=9000
    user=(--user "$uid:$uid" --group-add 1000)   # the caller, plus the images' builder group (as compose does)
    [ "$rt" != python ] || user=()                  # python runs as its image's builder user (built with $uid)
    pm volume create --label "$label" "$prefix-cache-$rt" >/dev/null
    pmq run -d --name "$prefix-builder-$rt" --label "$label" --network "$prefix" --network-alias "builder-$rt" \
        "${ulimits[@]}" "${hardening[@]}" "${user[@]}" \
        -v "$workspace:/workspace" -v "$tmp/token:/run/secrets/sidecar-token:ro" \
        -v "$prefix-cache-$rt:${cache_dir[$rt]}" \
        -e EXEC_SERVER_TOKEN_FILE=/run/secrets/sidecar-token \
        "${image[$rt]}" exec-server -port "${port[$rt]}" -cwd /workspace >/dev/null
    sidecars="$sidecars${sidecars:+,}\"$rt\":{\"internal_url\":\"http://builder-$rt:${port[$rt]}\"}"
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
    [ "$status" = healthy ] || { pm logs "$name"; fail "$name is not healthy ($status) on port ${port[$rt]}"; }
    pid1=$(pm exec "$name" cat /proc/1/comm)
    [ "$pid1" = tini ] || fail "$name: PID 1 is $pid1, not tini"
    logs=$(pm logs "$name" 2>&1)   # (into a variable: grep -q on a pipe would end `podman logs` early, a failure under pipefail)
    ! grep -q 'not writable' <<<"$logs" || fail "$name warns about the workspace the caller created"
    echo "    $name: $status on -port ${port[$rt]} ($(pm inspect --format '{{.Config.Healthcheck.Test}}' "$name")), PID 1 $pid1"
done

step "the agent: under its init, wrappers on PATH for podman exec (no entrypoint), a login shell too"
agent="$prefix-agent"
pmq run -d --name "$agent" --label "$label" --network "$prefix" "${ulimits[@]}" "${hardening[@]}" \
    -v "$workspace:/workspace" -v "$tmp/token:/run/secrets/sidecar-token:ro" \
    -e BUILD_SIDECARS="$sidecars" -e SIDECAR_TOKEN_FILE=/run/secrets/sidecar-token \
    "${image[agent]}" sleep infinity >/dev/null
for _ in $(seq 1 100); do   # the entrypoint's summary line says the wrappers are in place
    logs=$(pm logs "$agent" 2>&1)
    grep -q '^sidecar-exec: wrappers in ' <<<"$logs" && break
    [ "$(pm inspect --format '{{.State.Running}}' "$agent")" = true ] || { pm logs "$agent"; fail "the agent exited"; }
    sleep 0.1
done
echo "    $(pm logs "$agent" 2>&1 | grep '^sidecar-exec: wrappers in ')"
pid1=$(pm exec "$agent" cat /proc/1/comm)
[ "$pid1" = tini ] || fail "the agent's PID 1 is $pid1, not tini"
probe=$(head -1 <<<"$(cd "$tmp/table-$first" && ls)")
for shell in "sh -c" "sh -lc"; do
    # shellcheck disable=SC2086
    found=$(pm exec "$agent" $shell "command -v $probe") || fail "podman exec $agent $shell: no $probe"
    [ "$found" = "/opt/sidecar/wrappers/$probe" ] || fail "podman exec $agent $shell: $probe is $found"
    echo "    podman exec $shell 'command -v $probe': $found"
done

step "the SSH backend in the agent: ssh-exec beside sidecar-exec, OpenSSH's client (AGENT_SSH=1), host-run for SSH_HOST"
version=$(pm exec "$agent" /opt/sidecar/ssh-exec --version) || fail "no /opt/sidecar/ssh-exec in the agent image"
client=$(pm exec "$agent" ssh -V 2>&1) || fail "no ssh on the agent image's PATH: $client"
# A port nothing listens on: ssh-exec starts ssh, which is refused at once (exit 255 and ssh-exec's own line).
set +e
refused=$(pm exec -e SSH_HOST=127.0.0.1 -e SSH_PORT=1 -e SSH_CONTROL_PERSIST=0 "$agent" /opt/sidecar/ssh-exec true 2>&1)
code=$?
set -e
{ [ "$code" = 255 ] && grep -q '^ssh-exec: connection failed, the command did not run' <<<"$refused"; } \
    || fail "ssh-exec to a closed port: exit $code, $refused"
tools=$(pm exec -e SSH_HOST=ssh-host.invalid "$agent" sh -c \
    '/opt/sidecar/sidecar-exec --install-wrappers /tmp/ssh-wrappers 2>/dev/null && ls /tmp/ssh-wrappers')
{ grep -qx host-run <<<"$tools" && grep -qx auto-run <<<"$tools"; } || fail "SSH_HOST set: no host-run/auto-run wrappers: $tools"
echo "    $version; $client; a refused connection: exit 255 with ssh-exec's line; SSH_HOST set: host-run, auto-run"

step "inside the agent (podman exec): forwarded commands through the generated wrappers"
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
    # The pinned tool versions (PYTHON_TOOLS).
    expect "$(poetry --version)" "Poetry (version 2.5.1)" "poetry --version"
    expect "$(pytest --version 2>&1)" "pytest 9.2.0" "pytest --version"
    expect "$(ruff --version)" "ruff 0.17.6" "ruff --version"
    expect "$(black --version | head -1)" "black, 26.10.1 (compiled: yes)" "black --version"
    expect "$(mypy --version)" "mypy 2.4.1 (compiled: yes)" "mypy --version"
    # pip as the non-root caller: HOME and the pip cache (a named volume) are writable, PyPI is reachable.
    pip install -q --user --no-warn-script-location --ignore-installed --no-deps six >/dev/null 2>&1 \
        || pip install --user --ignore-installed --no-deps six || fail "pip install --user six"
    expect "$(python3 -c 'import six; print(six.__name__)')" six "package installed by the builder user"
    expect "$(pip cache dir)" /cache/pip "pip cache folder (a named volume)"
    python3 -c 'open("/cache/pip/written-by-builder", "w").write("ok")' || fail "pip cache volume not writable"
    echo "    python: wrappers, output, exit codes, streaming, cwd, files, pip, pytest, pinned poetry/pytest/ruff/black/mypy OK"
fi

if has node; then
    expect "$(command -v node)" /opt/sidecar/wrappers/node "node is a wrapper"
    expect "$(node -e 'console.log(process.version.startsWith("v"), process.getuid(), process.cwd())')" "true $UID_EXPECTED /workspace" "node -e"
    expect "$(code node -e 'process.exit(5)')" 5 "exit code"
    expect "$(SIDECAR_STREAM=1 node -e 'process.stdout.write("no newline")')" "no newline" "streaming, partial line"
    npm --version | grep -Eq '^[0-9]+\.' || fail "npm --version"
    npx --version >/dev/null || fail "npx --version"
    # The pinned package managers (NODE_TOOLS), from corepack where the base has it.
    expect "$(pnpm --version)" 9.15.9 "pnpm --version"
    expect "$(yarn --version)" 1.22.22 "yarn --version outside a project that pins one"
    expect "$(npm config get cache)" /cache/npm "npm cache folder"
    case "$(pnpm store path)" in /cache/pnpm/*) ;; *) fail "pnpm store path: $(pnpm store path), not in /cache/pnpm" ;; esac
    mkdir -p nodeproj && cd nodeproj
    npm init -y >/dev/null
    npm install --no-audit --no-fund is-number@7 >/dev/null 2>&1 || npm install --no-audit --no-fund is-number@7
    expect "$(node -e 'console.log(require("is-number")(5))')" true "npm install into the workspace"
    [ -f /workspace/nodeproj/node_modules/is-number/package.json ] || fail "node_modules not in the shared workspace"
    cd /workspace
    if [ "$COREPACK" = 1 ]; then
        mkdir -p berry && cd berry
        printf '{"name": "berry", "packageManager": "yarn@4.9.1"}\n' >package.json
        # (Yarn's npm build of 4.9.1, which corepack takes from the registry here, reports 4.9.1-git.<date>.hash-…)
        case "$(yarn --version)" in 4.9.1*) ;; *) fail "yarn in a project pinning yarn@4.9.1: $(yarn --version)" ;; esac
        cd /workspace
        corepack_note=", yarn@4 through packageManager"
    else
        corepack_note=" (no corepack on this base: packageManager not checked)"
    fi
    node -e 'require("fs").writeFileSync("from-node.txt", "written by the node builder\n")'
    expect "$(cat /workspace/from-node.txt)" "written by the node builder" "file written by the builder"
    echo "    node: wrappers, output, exit codes, streaming, npm/npx, pinned pnpm/yarn$corepack_note, npm install, files OK"
fi

if has java; then
    printf 'public class Hello { public static void main(String[] a) { System.out.println("hello " + a[0]); System.exit(4); } }\n' >Hello.java
    javac Hello.java
    set +e; out=$(java -cp /workspace Hello java); c=$?; set -e
    expect "$out/$c" "hello java/4" "javac + java"
    mvn --version >/tmp/mvn.out 2>&1 || fail "mvn --version"
    # No terminal here: no colour codes and no closing ESC[0m (the test's stray "[0m" came from Debian's Maven).
    ! grep -q "$(printf '\033')" /tmp/mvn.out || fail "mvn writes ANSI escape codes into a pipe: $(od -c /tmp/mvn.out | tail -3)"
    gradle --version >/dev/null 2>&1 || fail "gradle --version"
    echo "    java: javac, java, exit code, mvn (plain text), gradle OK"
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
pmq exec -i -e RUNTIMES="$runtimes" -e UID_EXPECTED="$uid" -e COREPACK="$([ -n "$node_base" ] && echo 1 || echo 0)" \
    "$agent" /bin/sh -s <<<"$agent_script" || fail "agent checks"

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

if [[ " $runtimes " == *" node "* ]]; then
    step "a second caller (uid $other_uid, in the builder group) reuses the npm cache volume uid $uid filled"
    # shellcheck disable=SC2016
    out=$(pmq run --rm --network "$prefix" "${ulimits[@]}" "${hardening[@]}" --user "$other_uid:$other_uid" \
        --group-add 1000 -v "$prefix-cache-node:/cache/npm" "${image[node]}" sh -c '
            cd "$(mktemp -d)" && npm init -y >/dev/null && npm install --no-audit --no-fund is-odd@3 2>&1 | tail -3
            test -f node_modules/is-odd/package.json && echo installed') || true
    grep -q '^installed$' <<<"$out" || fail "uid $other_uid cannot use the cache volume: $out"
    dir=$(pm volume inspect --format '{{.Mountpoint}}' "$prefix-cache-node")
    echo "    npm install as uid $other_uid: installed; the volume now holds files of uids" \
        "$(find "$dir" -mindepth 1 -printf '%U\n' | sort -u | tr '\n' ' ')"
fi

step "sidecar-exec is static: alone in an empty image (FROM scratch: no libc, no NSS) it resolves and reaches a builder"
mkdir -p "$tmp/scratch"
cp images/dist/sidecar-exec "$tmp/scratch/"
printf 'FROM scratch\nCOPY sidecar-exec /sidecar-exec\nENTRYPOINT ["/sidecar-exec"]\n' >"$tmp/scratch/Containerfile"
pm build -q --iidfile "$tmp/iid-scratch" "$tmp/scratch" >/dev/null
out=$(pmq run --rm --network "$prefix" "${ulimits[@]}" "${hardening[@]}" --user "$uid:$uid" \
    -v "$tmp/token:/run/secrets/sidecar-token:ro" -e SIDECAR_TOKEN_FILE=/run/secrets/sidecar-token \
    -e BUILD_SIDECARS="$sidecars" -e SIDECAR_CWD=/workspace \
    "$(cat "$tmp/iid-scratch")" --status) || { echo "$out"; fail "sidecar-exec --status from an empty image"; }
grep -q "builder-$first" <<<"$out" || { echo "$out"; fail "no builder-$first in --status"; }
while IFS= read -r line; do echo "    $line"; done <<<"$out"
pm rmi -f "$(cat "$tmp/iid-scratch")" >/dev/null 2>&1 || true

step "podman stop: SIGTERM to tini (PID 1); a builder's exec-server exits at once, the agent's command too"
for name in "$agent" $(for rt in $runtimes; do echo "$prefix-builder-$rt"; done); do
    t0=$(date +%s%N)
    pmq stop -t 10 "$name" >/dev/null
    ms=$((($(date +%s%N) - t0) / 1000000))
    code=$(pm inspect --format '{{.State.ExitCode}}' "$name")
    echo "    $name stopped in $ms ms, exit code $code"
    # Without an init that forwards it, SIGTERM is ignored by PID 1 and the engine waits 10 s for SIGKILL.
    [ "$ms" -lt 3000 ] || fail "$name took $ms ms to stop: SIGTERM was not handled (the engine waited for SIGKILL)"
done
for rt in $runtimes; do
    logs=$(pm logs "$prefix-builder-$rt" 2>&1)
    grep -q 'command finished' <<<"$logs" || fail "$prefix-builder-$rt logged no command"
done

# images/compose.yaml as its header says, on ENGINE: docker-compose against the real Docker Engine, or podman's API.
compose_example() {
    local engine="$1" host project limit_keys="" override up_pid out line steps ids owner pid1 t0 ms left
    step "images/compose.yaml as its header says: docker-compose on $engine, the steps run as the caller"
    # The file is sidecarctl's output (sidecarctl/tests/emitters.rs keeps it so); this runs it. The header's steps
    # are read from the file and run as written: the setup lines as the caller in a folder of their own, `docker
    # compose` as docker-compose with this run's project name and an override that adapts the host, not the file:
    # this run's image ids, the run's label (cleanup) and, on podman, limits it may set here. Docker runs each
    # builder's HEALTHCHECK itself; podman without systemd runs none, so there the loop below runs each starting
    # builder's check while `up` waits on service_healthy.
    project="$tmp/compose-$engine"
    install -d -o "$uid" -g "$uid" -m 0755 "$project"
    cp images/compose.yaml "$project/compose.yaml"
    local ids_name=image
    [ "$engine" = podman ] || ids_name=docker_image
    local -n ids_of="$ids_name"
    [ "$engine" != podman ] || limit_keys='ulimits: {nofile: {soft: 4096, hard: 4096}, nproc: {soft: 4096, hard: 4096}}, '
    override="$tmp/compose-host-$engine.yaml"
    cat >"$override" <<YAML
services:
  builder-node: {image: "${ids_of[node]}", ${limit_keys}labels: {sidecar-images-test: "$prefix"}}
  builder-python: {image: "${ids_of[python]}", ${limit_keys}labels: {sidecar-images-test: "$prefix"}}
  agent: {image: "${ids_of[agent]}", ${limit_keys}labels: {sidecar-images-test: "$prefix"}}
volumes:
  npm-cache: {labels: {sidecar-images-test: "$prefix"}}
  pip-cache: {labels: {sidecar-images-test: "$prefix"}}
YAML
    if [ "$engine" = podman ]; then
        # (podman itself, not the pm function: $! must be podman's pid for the cleanup's kill)
        podman --runtime runc system service --time=0 "unix://$tmp/podman.sock" >"$tmp/podman-api.log" 2>&1 &
        api_pid=$!
        host="unix://$tmp/podman.sock"
        # Ready when the API answers (the service writes no ready line).
        for _ in $(seq 1 300); do
            [ "$(curl -s --max-time 2 --unix-socket "$tmp/podman.sock" http://localhost/_ping 2>/dev/null)" = OK ] && break
            sleep 0.1
        done
    else
        host="$docker_host"
    fi
    # `docker compose SUB …` of the header: exec without a TTY (-T) here.
    dc() {
        local sub="$1"
        shift
        [ "$sub" != exec ] || set -- -T "$@"
        (cd "$project" && DOCKER_HOST="$host" \
            docker-compose -p "$prefix" -f compose.yaml -f "$override" "$sub" "$@" </dev/null)
    }
    steps=$(sed -n '/^# Then, in the folder of this file/,/^#$/s/^#   //p' images/compose.yaml)
    [ "$(grep -c . <<<"$steps")" -ge 5 ] || { echo "$steps"; fail "images/compose.yaml: no steps in its header"; }
    out=""
    while IFS= read -r line <&3; do   # (fd 3: the commands below may read stdin)
        echo "    \$ $line"
        case "$line" in
            "docker compose up"*)
                eval "dc ${line#docker compose }" >"$tmp/compose-up.log" 2>&1 &
                up_pid=$!
                if [ "$engine" = podman ]; then
                    while kill -0 "$up_pid" 2>/dev/null; do
                        for c in $(podman ps -q --filter "label=com.docker.compose.project=$prefix" --filter health=starting); do
                            pm healthcheck run "$c" >/dev/null 2>&1 || true
                        done
                        sleep 0.5
                    done
                fi
                wait "$up_pid" || { cat "$tmp/compose-up.log"; fail "docker compose up on $engine"; }
                ;;
            "docker compose "*)
                out=$(eval "dc ${line#docker compose }" 2>&1) || { echo "$out"; fail "$line"; }
                while IFS= read -r o; do echo "      $o"; done <<<"$out"
                ;;
            *) (cd "$project" && setpriv --reuid="$uid" --regid="$uid" --clear-groups sh -c "$line" </dev/null) ;;
        esac
    done 3<<<"$steps"
    if ! grep -q '^Python 3' <<<"$out" || ! grep -qE '^[0-9]+\.[0-9]+' <<<"$out"; then
        fail "npm and python3 through the agent on $engine: $out"
    fi
    grep -qx "SIDECAR_UID=$uid" "$project/.env" || fail "the .env step did not write the caller's uid"
    # The secret is bound with its host mode: only the caller (builders and agent run as the caller) may read it.
    mode=$(stat -c '%u %a' "$project/sidecar-token")
    [ "$mode" = "$uid 600" ] || fail "the token step made sidecar-token owner/mode $mode, not $uid 600"
    # The containers as the file makes them: the builders as the caller with the builder group, the agent under an
    # init, files in the workspace the caller's.
    ids=$(dc exec builder-node id)   # (podman adds a passwd entry for the uid, "uid=2345(2345)"; Docker does not)
    [[ "$ids" =~ ^uid=${uid}[\ \(].*[=,]1000\(builder\) ]] || fail "builder-node runs as: $ids"
    dc exec agent sh -c 'python3 -c "open(\"from-compose\", \"w\").write(\"x\")"' >/dev/null
    owner=$(stat -c %u "$project/workspace/from-compose")
    [ "$owner" = "$uid" ] || fail "a file python wrote through the agent belongs to uid $owner, not $uid"
    pid1=$(dc exec agent cat /proc/1/cmdline | tr '\0' ' ')
    [[ "$pid1" == *init* ]] || fail "the agent's PID 1 is $pid1, not an init"
    # Without an init the engine would wait the whole 30 s for SIGKILL; with one it takes about a second, the rest
    # being docker-compose's own start-up (generous: the machine may be loaded).
    t0=$(date +%s%N)
    dc stop -t 30 agent >/dev/null 2>&1
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$ms" -lt 15000 ] || fail "docker compose stop agent took $ms ms on $engine: SIGTERM was not handled"
    echo "    builder-node: $ids; file owner $owner; agent PID 1: $pid1; stopped in $ms ms"
    dc down --volumes >/dev/null 2>&1 || fail "docker compose down on $engine"
    left=$(on "$engine" ps -aq --filter "label=com.docker.compose.project=$prefix")
    [ -z "$left" ] || fail "docker compose down left containers on $engine: $left"
    if [ -n "$api_pid" ]; then
        kill "$api_pid" 2>/dev/null || true
        wait "$api_pid" 2>/dev/null || true
        api_pid=""
    fi
}

if [[ " $runtimes " == *" node "* && " $runtimes " == *" python "* ]]; then
    for engine in $engines; do compose_example "$engine"; done
else
    step "images/compose.yaml: skipped, IMAGES_TEST_RUNTIMES lacks node or python (the example's builders)"
fi

step "left on this host for the next run (shared by all runs; this run's containers, network and volumes go on exit)"
for engine in $engines; do
    kept=()
    for ref in "$base" "$node_base" "$rust_base" sidecar-agent localhost/sidecar-test-compiled-inputs sidecar-compiled-check \
        $(for rt in $runtimes; do echo "sidecar-builder-$rt"; done); do
        [ -n "$ref" ] && image_exists "$engine" "$ref" && kept+=("$ref")
    done
    echo "    on $engine:"
    for ref in "${kept[@]}"; do
        printf '    %-45s %s\n' "$ref" "$(on "$engine" image inspect --format '{{.Size}}' "$ref" | numfmt --to=si)B"
    done
    case "$engine" in
        podman) echo "    remove them: podman rmi -f ${kept[*]}; podman image prune -f" ;;
        docker) echo "    remove them: docker rmi -f ${kept[*]}; docker builder prune -f (against a dockerd on" \
            "its data root), or with no dockerd using it: rm -rf ${SIDECAR_DOCKER_DATA:-/var/tmp/sidecar-docker}" ;;
    esac
done
echo "    (each size counts again the layers it shares with the others)"
echo "    debootstrap cache: $(du -sh "$cache" | cut -f1) in $cache (rm -rf $cache); binaries: images/dist/, target/"

step "images OK ($runtimes on $engines) in $(($(date +%s) - started)) s"
