#!/bin/sh
# Builds the release binaries as the images ship them and prints the folder that holds them:
#   - sidecar-exec and ssh-exec (the SSH backend; one crate, two binaries) statically linked (glibc,
#     +crt-static), so they run in any agent image, even FROM scratch;
#   - exec-server dynamically linked against glibc, because builder images are glibc distributions and only a
#     dynamic build lets std spawn commands with posix_spawn (a static one cannot find
#     posix_spawn_file_actions_addchdir_np and falls back to fork, measured ~25% slower for 200 parallel commands).
# One target folder and one RUSTFLAGS for all three, target/static (so the ordinary builds stay as they are): only
# the two client binaries are linked statically, by `cargo rustc … -- -C target-feature=+crt-static`, which applies
# to their final link alone (the libc crate and std choose static glibc there; with relocation-model=static, below,
# the result is a static executable, not static-pie). Before,
# exec-server (target/release) and the clients (target/static, RUSTFLAGS with +crt-static, --target) were two cold
# builds, and a fresh clone compiled every shared dependency and proc macro twice; now a dependency the server and the
# clients use with the same features is compiled once (138 crates instead of 161; the ones whose features differ
# between the two, tokio and hyper among them, are still compiled for each, as in any two cargo invocations). cargo
# finds the build up to date on the next call (a second or two), so images/test.sh, bench/run.sh and bench/faults.sh
# all call it, and all test and measure the binaries users get. `images/binaries.sh --static-rustflags` prints the
# static build's RUSTFLAGS (bench/ab-argv.sh builds with them).
#
# `images/binaries.sh --dist` also places them in images/dist/, where the Dockerfile's BINARIES=prebuilt takes them
# (`sidecarctl image build --base` runs it when they are missing or older than the sources), and prints that folder.
# A binary is replaced by a rename, and only when its bytes changed: a concurrent build may be copying images/dist,
# and an unchanged file keeps the build's layer cache. images/dist/.built is touched last: "current as of now",
# for the binaries left as they were (sidecarctl's freshness check reads it).
#
# relocation-model=static: the clients are static executables at a fixed address, not static-pie. A static-pie binary
# relocates itself at every start (4,300 relative relocations, writing the pages of .data.rel.ro and the GOT: 17 page
# faults of each call's ~100); a fixed one has none. Measured interleaved against static-pie (BENCHMARKS.md, "P1:
# where a forwarded call's time goes"). What it gives up is address randomisation of the client's own code and data
# (its heap, stack and libraries' mappings stay randomised): the client runs as the agent's user, which can read the
# token it holds anyway, and parses only its own sidecar's replies, in safe Rust.
#
# httparse_disable_simd: httparse otherwise picks its SIMD header parser at run time, and that first CPU feature
# probe (cpuid, a VM exit under virtualisation) cost every wrapped call ~0.05 ms of start-up, to parse one
# reply's few headers (see BENCHMARKS.md, P1). A cfg reaches httparse only through RUSTFLAGS, so exec-server is
# built with it too: it parses a request's few headers with the portable parser, and saves the same probe once.
set -eu
cd "$(dirname "$0")/.."
cfg='--cfg httparse_disable_simd="1"'
static='-C target-feature=+crt-static -C relocation-model=static'
if [ "${1:-}" = "--static-rustflags" ]; then
    echo "$static $cfg"
    exit 0
fi
CARGO_TARGET_DIR="$(pwd)/target/static"
export RUSTFLAGS="$cfg" CARGO_TARGET_DIR
# `images/binaries.sh --sidecarctl`: sidecarctl itself, built and linked as the clients are (static glibc, so it runs
# on any Linux of the same architecture without a Rust toolchain), its path printed; nothing shipped is built. Copy
# it onto PATH (docs/sidecarctl.md, "Installing").
if [ "${1:-}" = "--sidecarctl" ]; then
    # shellcheck disable=SC2086 # two flags, split on purpose
    cargo rustc --quiet --release --locked -p sidecarctl --bin sidecarctl -- $static
    echo "$CARGO_TARGET_DIR/release/sidecarctl"
    exit 0
fi
# `images/binaries.sh --example CRATE NAME`: an example of sidecar-exec built as the clients are (static), or of
# exec-server as the server is (bench/p1_breakdown.py's floor client and server), its path printed; nothing shipped
# is built.
if [ "${1:-}" = "--example" ]; then
    # shellcheck disable=SC2086 # two flags, split on purpose
    case "$2" in
        sidecar-exec) cargo rustc --quiet --release --locked -p sidecar-exec --example "$3" -- $static ;;
        exec-server) cargo build --quiet --release --locked -p exec-server --example "$3" ;;
        *) echo "images/binaries.sh: --example takes sidecar-exec or exec-server, then the example's name" >&2; exit 2 ;;
    esac
    echo "$CARGO_TARGET_DIR/release/examples/$3"
    exit 0
fi
cargo build --quiet --release --locked -p exec-server
for bin in sidecar-exec ssh-exec; do
    # shellcheck disable=SC2086 # two flags, split on purpose
    cargo rustc --quiet --release --locked -p sidecar-exec --bin "$bin" -- $static
done
release="$CARGO_TARGET_DIR/release"
# The clients must need no libc of the agent image (they run FROM scratch): ldd says so of a static(-pie) binary.
for bin in sidecar-exec ssh-exec; do
    case "$(ldd "$release/$bin" 2>&1)" in
        *"statically linked"* | *"not a dynamic executable"*) ;;
        *) echo "images/binaries.sh: $release/$bin is not statically linked: $(ldd "$release/$bin" 2>&1)" >&2; exit 1 ;;
    esac
done
out="$(pwd)/target/shipped"
mkdir -p "$out"
cp -f "$release/exec-server" "$release/sidecar-exec" "$release/ssh-exec" "$out/"
if [ "${1:-}" = "--dist" ]; then
    dist="$(pwd)/images/dist"
    mkdir -p "$dist"
    for bin in exec-server sidecar-exec ssh-exec; do
        cmp -s "$out/$bin" "$dist/$bin" \
            || { install -m 0755 "$out/$bin" "$dist/.$bin.$$" && mv -f "$dist/.$bin.$$" "$dist/$bin"; }
    done
    touch "$dist/.built"
    out="$dist"
fi
echo "$out"
