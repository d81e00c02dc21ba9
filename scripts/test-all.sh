#!/usr/bin/env bash
# Runs every mpstack test: unit, property, scenario (sim), no-allocation, interop with
# the Linux kernel (as root: network namespaces and TAP devices), FreeBSD's
# packetdrill TCP suite (scripts/packetdrill.sh), and Miri over the buffer pool.
# Installs the Linux tools the interop tests use when run as root on a
# Debian-like machine. Fails loudly on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    need=()
    command -v ip >/dev/null || need+=(iproute2)
    command -v ping >/dev/null || need+=(iputils-ping)
    command -v arping >/dev/null || need+=(iputils-arping)
    command -v socat >/dev/null || need+=(socat)
    command -v tcpdump >/dev/null || need+=(tcpdump)
    command -v python3 >/dev/null || need+=(python3)
    command -v setpriv >/dev/null || need+=(util-linux)
    command -v iptables >/dev/null || need+=(iptables)
    command -v ethtool >/dev/null || need+=(ethtool)
    command -v curl >/dev/null || need+=(curl)
    command -v sha256sum >/dev/null || need+=(coreutils)
    command -v nc >/dev/null || need+=(netcat-openbsd)
    command -v iperf3 >/dev/null || need+=(iperf3)
    command -v hping3 >/dev/null || need+=(hping3)
    command -v nmap >/dev/null || need+=(nmap)
    command -v ndisc6 >/dev/null || need+=(ndisc6)
    command -v tracepath >/dev/null || need+=(iputils-tracepath)
    command -v atk6-implementation6 >/dev/null || need+=(thc-ipv6)
    /usr/bin/python3 -c "import scapy" 2>/dev/null || need+=(python3-scapy)
    # FRR (zebra, bgpd) and BIRD: the routing daemons of the FPM interop test.
    [ -x /usr/lib/frr/zebra ] || need+=(frr)
    command -v bird >/dev/null || need+=(bird2)
    # packetdrill, built from third_party/ for FreeBSD's TCP suite.
    command -v bison >/dev/null || need+=(bison)
    command -v flex >/dev/null || need+=(flex)
    command -v make >/dev/null || need+=(make)
    command -v cc >/dev/null || need+=(gcc)
    if [ ${#need[@]} -gt 0 ]; then
        say "installing test tools: ${need[*]}"
        apt-get update -qq
        # Packages with daemons (frr, bird2) must not start them: the tests run
        # their own, in namespaces they make.
        made_policy=0
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod 755 /usr/sbin/policy-rc.d
            made_policy=1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
        if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    fi
else
    echo "note: not root: interop tests will report SKIPPED (they need namespaces and TAP devices)"
fi

# One build of every library, binary, test and example, in the test profile; the
# steps below (and packetdrill's shared object) reuse it rather than building the
# workspace again in another profile or with other features. net's `tokio` feature
# is on in it (mpstack depends on net with it), so its async sockets' unit tests,
# crates/net/tests/tokio.rs and its doc example run in the workspace steps below.
say "build every test, binary and example (test profile)"
cargo build --profile test --workspace --lib --bins --tests --examples

# Miri interprets the mbuf pool's tests on one core for a minute or more: it runs
# beside the tests below, at the lowest priority, and is waited for at the end.
miri_pid=
if [ "${MPSTACK_SKIP_MIRI:-0}" != 1 ]; then
    if ! cargo +nightly miri --version >/dev/null 2>&1; then
        rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 || true
    fi
    if cargo +nightly miri --version >/dev/null 2>&1; then
        miri_log=$(mktemp /tmp/mpstack-miri-XXXXXX.log)
        say "Miri: the mbuf pool's unsafe code (in the background, log: $miri_log)"
        MIRIFLAGS="${MIRIFLAGS:-}" setsid nice -n 19 cargo +nightly miri test -p mbuf --lib >"$miri_log" 2>&1 &
        miri_pid=$!
        # A failing step ends this script: the background run (its own process
        # group, through setsid) ends with it.
        trap 'kill -- -"$miri_pid" 2>/dev/null || true' EXIT
    elif [ "${CI:-}" = true ]; then
        echo "Miri: no nightly toolchain with miri on this machine" >&2
        exit 1
    else
        echo "Miri: SKIPPED (no nightly toolchain with miri on this machine)"
    fi
fi

say "cargo test --workspace (unit, property, scenario, no-allocation, interop)"
cargo test --workspace --lib --bins --tests -- --test-threads="${MPSTACK_TEST_THREADS:-2}"

# The examples were built above; run them (in process, no root, a second or two each).
say "the embedding examples (crates/mpstack/examples), run"
for ex in tokio_echo hyper_server; do
    ./target/debug/examples/"$ex"
done

say "benchmarks, each run once as a test (criterion's test mode)"
cargo test --workspace --bench '*'

say "doc tests"
cargo test --workspace --doc

say "BENCHMARKS.md's tables are what bench-results/ holds (scripts/bench-report.py --check)"
python3 scripts/bench-report.py --check

# packetdrill needs bison, flex and a C compiler to build (installed above as
# root); elsewhere the suite is skipped, except in CI where it must run.
if [ "${MPSTACK_SKIP_PACKETDRILL:-0}" != 1 ]; then
    if [ "$(id -u)" = 0 ] || { command -v bison && command -v flex && command -v cc; } >/dev/null; then
        say "FreeBSD's packetdrill TCP suite (scripts/packetdrill.sh; failures held to scripts/packetdrill.expect)"
        MPSTACK_PD_PROFILE=test ./scripts/packetdrill.sh
    elif [ "${CI:-}" = true ]; then
        echo "packetdrill suite: cannot build packetdrill here (not root, no bison/flex/cc)" >&2
        exit 1
    else
        echo "packetdrill suite: SKIPPED (not root and no bison, flex and cc to build packetdrill)"
    fi
fi

if [ -n "$miri_pid" ]; then
    say "Miri: the mbuf pool's unsafe code (waiting for the background run)"
    if wait "$miri_pid"; then
        tail -3 "$miri_log"
    else
        cat "$miri_log"
        echo "Miri failed (log: $miri_log)" >&2
        exit 1
    fi
fi
say "all tests passed"
