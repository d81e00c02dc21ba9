#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds (default 10). Installs cargo-fuzz if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: no nightly toolchain: cannot build fuzz targets" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cd fuzz
for t in $(cargo +nightly fuzz list); do
    echo "==> fuzz $t for ${secs}s"
    cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 2>&1 | tail -3
done
