#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds (default 10), two at a time (one a
# core), after one build of them all. Installs cargo-fuzz if needed. Fails when a
# target finds a crash (the input is left in fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
jobs="${MPSTACK_FUZZ_JOBS:-2}"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain: cannot build fuzz targets" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cd fuzz
echo "==> fuzz: building every target"
cargo +nightly fuzz build
logs=$(mktemp -d /tmp/mpstack-fuzz-XXXXXX)
run_target() {
    local t="$1"
    if cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 >"$logs/$t.log" 2>&1; then
        printf '==> fuzz %s for %ss: ok\n%s\n' "$t" "$secs" "$(tail -3 "$logs/$t.log")"
    else
        printf '==> fuzz %s for %ss: FAILED\n%s\n' "$t" "$secs" "$(tail -40 "$logs/$t.log")"
        return 1
    fi
}
export -f run_target
export secs logs
rc=0
cargo +nightly fuzz list | xargs -P "$jobs" -I{} bash -c 'run_target "$1"' _ {} || rc=1
rm -rf "$logs"
if [ $rc != 0 ]; then
    echo "fuzz: a target failed (above)" >&2
fi
exit $rc
