#!/usr/bin/env bash
# Runs benchmarks with --json and keeps each one's output as its latest run in
# bench-results/WHAT.jsonl (a first line with the command, commit, date and machine),
# then rewrites BENCHMARKS.md's tables from them (scripts/bench-report.py).
#
#   scripts/bench-run.sh netchannel quic          # those two, with their defaults
#   scripts/bench-run.sh 'tcp --only mpstack,smoltcp --rounds 3'
#
# Each argument is a benchmark and its options, as `mpstack bench` takes them.
# Some need root (rfc2544; tcp's linux-veth and tap rows): run as root for those.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    echo "usage: scripts/bench-run.sh 'WHAT [OPTIONS]'..." >&2
    exit 64
fi
cargo build --release -p mpstack -p mpstack-bench
mkdir -p bench-results
commit=$(git rev-parse --short HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    commit="$commit+changes"
fi
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(. /etc/os-release && echo "$PRETTY_NAME")"
for spec in "$@"; do
    # shellcheck disable=SC2086
    set -- $spec
    what=$1
    out="bench-results/$what.jsonl"
    tmp="$out.tmp"
    echo "==> mpstack bench $spec --json" >&2
    python3 -c 'import json,sys; print(json.dumps({"meta": {"command": sys.argv[1], "commit": sys.argv[2], "date": sys.argv[3], "machine": sys.argv[4]}}))' \
        "mpstack bench $spec" "$commit" "$(date -u +%Y-%m-%d)" "$machine" > "$tmp"
    # shellcheck disable=SC2086
    ./target/release/mpstack bench $spec --json >> "$tmp"
    mv "$tmp" "$out"
done
python3 scripts/bench-report.py
