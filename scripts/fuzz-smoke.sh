#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds (default 10), two at a time (one a
# core), after one build of them all, and beside them the long run of TCP's
# randomized pair test (MPSTACK_FUZZ_PROP_CASES cases, default 100,000, about ten
# seconds alone, from a new seed each time, printed). Installs cargo-fuzz if needed.
# Fails when a target finds a crash (the input is left in fuzz/artifacts/<target>/)
# or a case of the pair test fails (rerun it with the seed it prints).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
jobs="${MPSTACK_FUZZ_JOBS:-2}"
prop_cases="${MPSTACK_FUZZ_PROP_CASES:-100000}"

# The pair test's long run, in the background while the targets build: the test
# binary MPSTACK_PROP_BIN names (.ci/run names net's, built in its build step, so
# that this run does not wait on cargo's lock while the test command's cargo holds
# it), else through cargo in the test profile.
prop_seed=$(( $(date +%s) % 1000000 ))
prop_log=$(mktemp /tmp/mpstack-prop-XXXXXX.log)
export MPSTACK_TCP_PROP_CASES="$prop_cases" MPSTACK_TCP_PROP_SEED="$prop_seed"
if [ -n "${MPSTACK_PROP_BIN:-}" ]; then
    "$MPSTACK_PROP_BIN" tcp::tcb::tests::prop >"$prop_log" 2>&1 &
else
    cargo test --profile test -p net --lib tcp::tcb::tests::prop >"$prop_log" 2>&1 &
fi
prop_pid=$!
unset MPSTACK_TCP_PROP_CASES MPSTACK_TCP_PROP_SEED
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
if wait "$prop_pid"; then
    printf '==> TCP pair test, %s cases from seed %s: ok\n%s\n' "$prop_cases" "$prop_seed" \
        "$(grep 'test result' "$prop_log" | head -1)"
else
    printf '==> TCP pair test, %s cases from seed %s: FAILED (rerun: MPSTACK_TCP_PROP_CASES=%s MPSTACK_TCP_PROP_SEED=%s cargo test -p net --lib tcp::tcb::tests::prop)\n%s\n' \
        "$prop_cases" "$prop_seed" "$prop_cases" "$prop_seed" "$(tail -60 "$prop_log")"
    rc=1
fi
rm -f "$prop_log"
if [ $rc != 0 ]; then
    echo "fuzz: a target failed (above)" >&2
fi
exit $rc
