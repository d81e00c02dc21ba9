#!/usr/bin/env bash
# FreeBSD's packetdrill TCP suite against mpstack: builds packetdrill (a GPLv2 test
# tool, built and run beside the project, never linked into it) and the shared object
# it drives (crates/packetdrill), runs every script of the groups named (default:
# snd-syn state-event-engine rcv-icmp socket-api rcv-data-segments), and prints
# pass/fail per group and the failures. Results: target/packetdrill/results.tsv.
#
#   scripts/packetdrill.sh [GROUP…]       PACKETDRILL_SRC, TCP_TESTSUITE: where the
#   scripts/packetdrill.sh FILE.pkt       sources are (default ../shared/tools/…)
#
# Each script runs in virtual time with the stack at 198.18.0.1 (2001:2::1) and
# packetdrill's side at 198.18.0.2 (2001:2::2); nothing touches a real network.
# The suite's `#ifdef FreeBSD` / `#ifdef STANDARD` blocks (where FreeBSD departs
# from the RFC) are kept for MPSTACK_PD_DEFINE (default FreeBSD: mpstack follows
# FreeBSD there, RFC 5961's challenge ACKs among them) before packetdrill reads
# the script, which Google's packetdrill does not do itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
src="${PACKETDRILL_SRC:-$root/../shared/tools/packetdrill/gtests/net/packetdrill}"
suite="${TCP_TESTSUITE:-$root/../shared/tools/tcp-testsuite}"
out="$root/target/packetdrill"
jobs="${MPSTACK_PD_JOBS:-2}"
mkdir -p "$out"

pd="$out/build/packetdrill"
if [ ! -x "$pd" ]; then
    [ -f "$src/packetdrill.c" ] || { echo "packetdrill sources not found at $src (set PACKETDRILL_SRC)" >&2; exit 1; }
    for t in bison flex make cc; do
        if ! command -v "$t" >/dev/null; then
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bison flex make gcc >/dev/null
                break
            fi
            echo "packetdrill needs $t" >&2
            exit 1
        fi
    done
    rm -rf "$out/build" && cp -r "$src" "$out/build"
    (cd "$out/build" && ./configure >/dev/null && make -j2 packetdrill >/dev/null 2>"$out/build.log") \
        || { echo "building packetdrill failed: $out/build.log" >&2; exit 1; }
fi
cargo build --release -q -p mpstack-packetdrill
so="$root/target/release/libmpstack_packetdrill.so"

# One script: PASS or FAIL, and packetdrill's output in $out/logs/.
run_one() {
    local f="$1" name v6 mtu local remote sock log
    name="${f#"$suite"/}"
    log="$out/logs/${name//\//_}.log"
    v6=0; grep -q -- '--ip_version=ipv6' "$f" && v6=1
    mtu=$(sed -n 's/^--mtu=\([0-9]*\).*/\1/p' "$f" | head -1)
    mtu="${mtu:-1500}"
    if [ "$v6" = 1 ]; then local=2001:2::1; remote=2001:2::2; else local=198.18.0.1; remote=198.18.0.2; fi
    sock=$(mktemp -u "/tmp/mpstack-pd-XXXXXX.sock")
    # The script with its #ifdef blocks resolved, beside the original (packetdrill
    # names files relative to the script's directory).
    local pkt="$out/scripts/${name//\//_}"
    awk -v def="${MPSTACK_PD_DEFINE:-FreeBSD}" '
        /^#ifdef /  { stack[++n] = keep; keep = keep && ($2 == def); next }
        /^#ifndef / { stack[++n] = keep; keep = keep && ($2 != def); next }
        /^#else/    { keep = stack[n] && !keep; next }
        /^#endif/   { keep = stack[n--]; next }
        BEGIN { keep = 1 }
        # FreeBSD-only socket options, which Linux (and so packetdrill built here)
        # has no symbol for: their FreeBSD numbers, which the shim takes.
        { gsub(/TCP_KEEPINIT/, "128") }
        keep' "$f" >"$pkt"
    if (cd "$(dirname "$f")" && PATH="$root/scripts/packetdrill:$PATH" MPSTACK_PD_SYSCTL="$sock" \
        timeout 60 "$pd" --so_filename="$so" \
            --so_flags="local=$local remote=$remote mtu=$mtu sysctl=$sock" \
            --local_ip="$local" --remote_ip="$remote" "$pkt") >"$log" 2>&1; then
        printf 'PASS\t%s\n' "$name"
    else
        printf 'FAIL\t%s\n' "$name"
    fi
    rm -f "$sock"
}
export -f run_one
export out suite root pd so

mkdir -p "$out/logs" "$out/scripts"
if [ $# -eq 1 ] && [ -f "$1" ]; then
    suite=$(cd "$(dirname "$1")/.." && pwd)
    export suite
    run_one "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
    cat "$out/logs/$(basename "$(dirname "$1")")_$(basename "$1").log"
    exit 0
fi
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(snd-syn state-event-engine rcv-icmp socket-api rcv-data-segments)
: >"$out/results.tsv"
for g in "${groups[@]}"; do
    [ -d "$suite/$g" ] || { echo "no group $g in $suite" >&2; exit 1; }
    find "$suite/$g" -name '*.pkt' | sort | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {} >>"$out/results.tsv"
done
sort -k2 -o "$out/results.tsv" "$out/results.tsv"
echo
printf '%-22s %6s %6s %6s\n' group scripts passed rate
for g in "${groups[@]}"; do
    n=$(grep -c $'\t'"$g/" "$out/results.tsv" || true)
    p=$(grep -c $'^PASS\t'"$g/" "$out/results.tsv" || true)
    printf '%-22s %6d %6d %5d%%\n' "$g" "$n" "$p" $(( n ? p * 100 / n : 0 ))
done
echo
echo "failures (logs in $out/logs/):"
grep $'^FAIL\t' "$out/results.tsv" | cut -f2 | sed 's/^/  /' || true
