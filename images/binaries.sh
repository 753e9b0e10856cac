#!/bin/sh
# Builds the release binaries as the images ship them and prints the folder that holds them:
#   - sidecar-exec and ssh-exec (the SSH backend; one crate, two binaries) statically linked (glibc,
#     +crt-static), so they run in any agent image, even FROM scratch;
#   - exec-server dynamically linked against glibc, because builder images are glibc distributions and only a
#     dynamic build lets std spawn commands with posix_spawn (a static one cannot find
#     posix_spawn_file_actions_addchdir_np and falls back to fork, measured ~25% slower for 200 parallel commands).
# The static build goes to target/static so the ordinary builds stay as they are. Used by images/test.sh,
# bench/run.sh and bench/faults.sh, so all of them test and measure the binaries users get.
# `images/binaries.sh --static-rustflags` prints the static build's RUSTFLAGS (bench/ab-argv.sh builds with them).
#
# httparse_disable_simd: httparse otherwise picks its SIMD header parser at run time, and that first CPU feature
# probe (cpuid, a VM exit under virtualisation) cost every wrapped call ~0.05 ms of start-up, to parse one
# reply's few headers (see BENCHMARKS.md, P1).
set -eu
cd "$(dirname "$0")/.."
static_rustflags='-C target-feature=+crt-static --cfg httparse_disable_simd="1"'
if [ "${1:-}" = "--static-rustflags" ]; then
    echo "$static_rustflags"
    exit 0
fi
triple="$(rustc -vV | sed -n 's/^host: //p')"
cargo build --quiet --release --locked -p exec-server
RUSTFLAGS="$static_rustflags" CARGO_TARGET_DIR="$(pwd)/target/static" \
    cargo build --quiet --release --locked --target "$triple" -p sidecar-exec
out="$(pwd)/target/shipped"
mkdir -p "$out"
cp -f target/release/exec-server "target/static/$triple/release/sidecar-exec" "target/static/$triple/release/ssh-exec" "$out/"
echo "$out"
