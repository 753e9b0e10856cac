#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60): cargo fuzz (libFuzzer) on the stable toolchain, seeded with
# the saved corpus in fuzz/regressions/<target>/. Exit 1 when a target finds an input that breaks its properties:
# the input is in fuzz/targets/artifacts/<target>/; copy it into fuzz/regressions/<target>/ (cargo test replays it)
# and fix the decoder. Prints one line per target with its executions and what it found.
#
# Why stable and no sanitizer: this machine kind (and CI) has one toolchain and cannot fetch nightly, and cargo fuzz
# needs nightly only for -Zsanitizer. The decoders are safe Rust (the workspace denies unsafe), so AddressSanitizer
# would add little; what the targets look for are panics and broken properties, which need no sanitizer. Release
# with debug assertions and overflow checks (-O -a): arithmetic that overflows is a crash too.
#
# FUZZ_MIN=1 after a long run: also minimise the grown corpus (cargo fuzz cmin) back into fuzz/regressions/ (the
# seed-* and crash-* files there are kept as they are).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
# At least 1: libFuzzer reads -max_total_time=0 as "no limit".
case "$seconds" in '' | *[!0-9]* | 0) echo "usage: fuzz/run.sh [SECONDS per target, at least 1]" >&2; exit 2 ;; esac
targets=(sse json_string reply_reader frames reply_head request)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz (crates.io)"
    cargo install cargo-fuzz --locked --version '^0.13'
fi
build=(--fuzz-dir targets -s none -O -a)
cargo fuzz build "${build[@]}"

failed=0
for target in "${targets[@]}"; do
    mkdir -p "targets/corpus/$target"
    log="targets/artifacts/$target.log"
    mkdir -p "targets/artifacts/$target"
    # One worker, one job; -rss_limit_mb bounds memory (a decoder that grows without bound is a crash too);
    # -dict: the format's tokens (keys, escapes, padding), which random mutation seldom spells;
    # -max_len 4 KiB: well past the limits the targets set (lines and events of at most 255 bytes, the reply's
    # layout within 64), short enough for many executions a second.
    if cargo fuzz run "${build[@]}" "$target" "targets/corpus/$target" "regressions/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=512 -max_len=4096 -dict="targets/dicts/$target.dict" \
        -print_final_stats=1 >"$log" 2>&1; then
        found="no crash"
    else
        found="FAILED: $(grep -m1 -E 'panicked at|ERROR: libFuzzer' "$log" || echo "see $log")"
        failed=1
    fi
    runs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
    corpus=$(find "targets/corpus/$target" -type f | wc -l)
    printf '%-13s %3s s  %10s executions  corpus %5s  %s\n' "$target" "$seconds" "$runs" "$corpus" "$found"
    [ "$found" = "no crash" ] || tail -40 "$log" >&2
done

if [ "${FUZZ_MIN:-0}" = 1 ] && [ "$failed" = 0 ]; then
    for target in "${targets[@]}"; do
        cp -n "regressions/$target"/* "targets/corpus/$target/"
        rm -rf "regressions/$target.min" && mkdir "regressions/$target.min"
        cargo fuzz cmin "${build[@]}" "$target" "targets/corpus/$target" -- -max_len=4096 >/dev/null 2>&1
        cp "targets/corpus/$target"/* "regressions/$target.min/"
        # The hand-written seeds and every crash keep their names (and their place, whatever cmin thinks of them).
        find "regressions/$target" -maxdepth 1 \( -name 'seed-*' -o -name 'crash-*' \) -exec cp {} "regressions/$target.min/" \;
        rm -rf "regressions/$target" && mv "regressions/$target.min" "regressions/$target"
        echo "$target: $(find "regressions/$target" -type f | wc -l) inputs kept in fuzz/regressions/$target"
    done
fi
exit "$failed"
