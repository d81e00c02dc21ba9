#!/usr/bin/env bash
# FreeBSD's packetdrill TCP suite against mpstack: builds packetdrill (a GPLv2 test
# tool, built and run beside the project, never linked into it) with the local
# changes in scripts/packetdrill.patch, and the shared object it drives
# (crates/packetdrill); runs every script of the groups named (default: snd-syn
# state-event-engine rcv-icmp socket-api rcv-data-segments fast-open mpstack); prints pass/fail per
# group and the failures; and holds the failures to scripts/packetdrill.expect.
# The group `mpstack` is this project's own scripts, in scripts/packetdrill/mpstack/
# (each defect found by another suite gets one there, IPv4 and IPv6); it runs with
# the FreeBSD groups by default.
#
#   scripts/packetdrill.sh [GROUP…]     every script of the groups; exit status 1
#                                       when a script fails that the expectations
#                                       do not list, or passes that they do
#   scripts/packetdrill.sh FILE.pkt…    those scripts, with packetdrill's output
#
# The sources: third_party/packetdrill and third_party/tcp-testsuite (copies of
# Google's packetdrill and Michael Tüxen's tcp-testsuite, with their licences), or
# PACKETDRILL_SRC and TCP_TESTSUITE. Results: target/packetdrill/results.tsv, one
# log per script in target/packetdrill/logs/. MPSTACK_PD_JOBS scripts at a time
# (default 2).
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
src="${PACKETDRILL_SRC:-$root/third_party/packetdrill}"
suite="${TCP_TESTSUITE:-$root/third_party/tcp-testsuite}"
# This project's own scripts: the group `mpstack`.
mine="$root/scripts/packetdrill"
patch="$root/scripts/packetdrill.patch"
expect="$root/scripts/packetdrill.expect"
out="$root/target/packetdrill"
jobs="${MPSTACK_PD_JOBS:-2}"
mkdir -p "$out"

# packetdrill, rebuilt when the local patch changes.
pd="$out/build/packetdrill"
stamp=$(cksum <"$patch")
if [ ! -x "$pd" ] || [ "$(cat "$out/build/.patch" 2>/dev/null)" != "$stamp" ]; then
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
    echo "building packetdrill (log: $out/build.log)"
    rm -rf "$out/build" && cp -r "$src" "$out/build"
    (cd "$out/build" && git apply -p1 "$patch") || { echo "scripts/packetdrill.patch does not apply to $src" >&2; exit 1; }
    (cd "$out/build" && ./configure >/dev/null && make -j2 packetdrill >/dev/null 2>"$out/build.log") \
        || { echo "building packetdrill failed: $out/build.log" >&2; exit 1; }
    echo "$stamp" >"$out/build/.patch"
fi
# The shared object and its control tool, built in MPSTACK_PD_PROFILE (default
# release). scripts/test-all.sh passes `test`: it has built them already with
# every test (`cargo build --profile test --workspace --tests`), and packetdrill
# runs in virtual time, so the unoptimised build passes the same scripts.
profile="${MPSTACK_PD_PROFILE:-release}"
case "$profile" in
    release) dir=release ;;
    dev | test) dir=debug ;;
    *) dir="$profile" ;;
esac
if [ "$profile" = test ]; then
    # As test-all.sh builds them: with the whole workspace's tests, so that the
    # features match that build and nothing is compiled again.
    cargo build -q --profile test --workspace --lib --bins --tests
else
    cargo build -q --profile "$profile" -p mpstack-packetdrill
fi
so="$root/target/$dir/libmpstack_packetdrill.so"
MPSTACK_PD_CTL="$root/target/$dir/mpstack-pd-ctl"

# One script: PASS or FAIL, and packetdrill's output in $out/logs/.
run_one() {
    local f="$1" name v6 mtu local remote sock log
    case "$f" in
        "$mine"/*) name="${f#"$mine"/}" ;;
        *) name="${f#"$suite"/}" ;;
    esac
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
        { gsub(/TCP_KEEPINIT/, "128"); gsub(/TCP_NOOPT/, "8") }
        # NPLab packetdrill names the codes of ICMP time exceeded; Google packetdrill
        # takes it by number.
        { gsub(/time_exceeded ttl_exceeded_in_transit/, "time_exceeded code_0")
          gsub(/time_exceeded frag_reass_exceeded/, "time_exceeded code_1") }
        # FreeBSD names tcpi_state values after its TCPS_ states; packetdrill
        # built on Linux has Linux names, and the shim reports Linux numbers.
        {
            gsub(/TCPI_CLOSED/, "TCP_CLOSE"); gsub(/TCPI_LISTEN/, "TCP_LISTEN")
            gsub(/TCPI_SYN_SENT/, "TCP_SYN_SENT"); gsub(/TCPI_SYN_RECEIVED/, "TCP_SYN_RECV")
            gsub(/TCPI_ESTABLISHED/, "TCP_ESTABLISHED"); gsub(/TCPI_CLOSE_WAIT/, "TCP_CLOSE_WAIT")
            gsub(/TCPI_FIN_WAIT_1/, "TCP_FIN_WAIT1"); gsub(/TCPI_CLOSING/, "TCP_CLOSING")
            gsub(/TCPI_LAST_ACK/, "TCP_LAST_ACK"); gsub(/TCPI_FIN_WAIT_2/, "TCP_FIN_WAIT2")
            gsub(/TCPI_TIME_WAIT/, "TCP_TIME_WAIT")
        }
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
export out suite mine root pd so MPSTACK_PD_CTL

mkdir -p "$out/logs" "$out/scripts"
if [ $# -ge 1 ] && [ -f "$1" ]; then
    rc=0
    for f in "$@"; do
        suite=$(cd "$(dirname "$f")/.." && pwd)
        export suite
        r=$(run_one "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
        cat "$out/logs/$(basename "$(dirname "$f")")_$(basename "$f").log"
        echo "$r"
        [ "${r%%$'\t'*}" = PASS ] || rc=1
    done
    exit $rc
fi
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(snd-syn state-event-engine rcv-icmp socket-api rcv-data-segments fast-open mpstack)
: >"$out/results.tsv"
for g in "${groups[@]}"; do
    dir="$suite/$g"
    [ -d "$dir" ] || dir="$mine/$g"
    [ -d "$dir" ] && [ "$g" != . ] || { echo "no group $g in $suite or $mine" >&2; exit 1; }
    n=$(find "$dir" -name '*.pkt' | wc -l)
    echo "$g: $n scripts" >&2
    find "$dir" -name '*.pkt' | sort | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {} >>"$out/results.tsv"
done
sort -k2 -o "$out/results.tsv" "$out/results.tsv"

# The expected failures: `PATH  REASON` lines (paths relative to the suite).
expected=$(awk '!/^[[:space:]]*#/ && NF { print $1 }' "$expect" | sort -u)
is_expected() { grep -qxF -- "$1" <<<"$expected"; }
echo
printf '%-22s %7s %7s %6s %9s\n' group scripts passed rate expected
for g in "${groups[@]}"; do
    n=$(grep -c $'\t'"$g/" "$out/results.tsv" || true)
    p=$(grep -c $'^PASS\t'"$g/" "$out/results.tsv" || true)
    x=$(grep -c "^$g/" <<<"$expected" || true)
    printf '%-22s %7d %7d %5d%% %9d\n' "$g" "$n" "$p" $(( n ? p * 100 / n : 0 )) "$x"
done
unexpected=() fixed=()
while IFS=$'\t' read -r r name; do
    if [ "$r" = FAIL ] && ! is_expected "$name"; then unexpected+=("$name"); fi
    if [ "$r" = PASS ] && is_expected "$name"; then fixed+=("$name"); fi
done <"$out/results.tsv"
echo
echo "expected failures (scripts/packetdrill.expect says why):"
{ grep $'^FAIL\t' "$out/results.tsv" || true; } | cut -f2 | while read -r name; do
    if is_expected "$name"; then echo "  $name"; fi
done
rc=0
if [ ${#unexpected[@]} -gt 0 ]; then
    echo
    echo "UNEXPECTED FAILURES (logs in $out/logs/):"
    printf '  %s\n' "${unexpected[@]}"
    rc=1
fi
if [ ${#fixed[@]} -gt 0 ]; then
    echo
    echo "PASSING BUT LISTED AS EXPECTED FAILURES (take them out of scripts/packetdrill.expect):"
    printf '  %s\n' "${fixed[@]}"
    rc=1
fi
[ $rc = 0 ] && echo && echo "packetdrill: every failure is an expected one"
exit $rc
