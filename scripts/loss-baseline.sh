#!/usr/bin/env bash
# Linux to Linux through a lossy router: the baseline for the interop tests'
# transfers under loss (crates/mpstack/tests/interop.rs, `Behind`). Three
# namespaces, sender (198.18.1.2) - router - receiver (198.18.2.2), veth pairs with
# segmentation offload off; the router drops LOSS of the TCP packets it forwards,
# both ways (iptables FORWARD, as the interop lab does). Sends BYTES with Linux's
# congestion control CC (per socket, TCP_CONGESTION) and prints the rate.
#
#   sudo scripts/loss-baseline.sh [LOSS] [BYTES] [CC]     # default 0.05 16777216 cubic
#
# Needs root, iproute2, iptables, ethtool, socat, bc. Removes its namespaces.
set -euo pipefail
loss=${1:-0.05}
bytes=${2:-16777216}
cc=${3:-cubic}
a=mpbase-a$$ r=mpbase-r$$ b=mpbase-b$$
listener=
cleanup() {
    if [ -n "$listener" ]; then kill "$listener" 2>/dev/null || true; fi
    for n in "$a" "$r" "$b"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM
for n in "$a" "$r" "$b"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add mpba netns "$a" type veth peer name mpbra netns "$r"
ip link add mpbb netns "$b" type veth peer name mpbrb netns "$r"
ip -n "$a" addr add 198.18.1.2/24 dev mpba
ip -n "$r" addr add 198.18.1.1/24 dev mpbra
ip -n "$r" addr add 198.18.2.1/24 dev mpbrb
ip -n "$b" addr add 198.18.2.2/24 dev mpbb
for x in "$a mpba" "$r mpbra" "$r mpbrb" "$b mpbb"; do
    set -- $x
    ip -n "$1" link set "$2" up
    ip netns exec "$1" ethtool -K "$2" gso off tso off gro off >/dev/null
done
ip -n "$a" route add default via 198.18.1.1
ip -n "$b" route add default via 198.18.2.1
ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "$r" iptables -A FORWARD -p tcp -m statistic --mode random \
    --probability "$loss" -j DROP
ip netns exec "$b" timeout --foreground 1800 socat -u TCP-LISTEN:9,reuseaddr /dev/null &
listener=$!
sleep 0.5
start=$(date +%s.%N)
ip netns exec "$a" sh -c "head -c $bytes /dev/zero | timeout 1800 socat -t 1800 - \
    TCP:198.18.2.2:9,setsockopt-string=6:13:$cc >/dev/null"
end=$(date +%s.%N)
wait "$listener" || true
secs=$(echo "$end - $start" | bc)
echo "linux->linux loss $loss cc $cc: $bytes B in $secs s, $(echo "$bytes * 8 / $secs / 1000000" | bc) Mbit/s"
