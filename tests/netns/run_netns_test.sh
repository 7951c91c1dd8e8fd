#!/usr/bin/env bash
# Multi-host TCP without a cluster: two network namespaces joined by a veth
# pair act as two hosts; two ranks run in each. Ranks in the same namespace
# talk over shm, across namespaces over tcp (coil treats a network namespace
# as a host). Addresses are private to the namespaces this script creates.
#
# Needs root and iproute2; otherwise exits 77 (skipped) and says why.
# Usage: run_netns_test.sh <path to launcher_rank>
set -u
rank_bin=${1:?usage: run_netns_test.sh LAUNCHER_RANK_BINARY}
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: needs iproute2 (ip)"; exit 77; fi

suffix=$$
nsA=coilA$suffix nsB=coilB$suffix
vethA=cva$suffix vethB=cvb$suffix
addrA=10.213.7.1 addrB=10.213.7.2
logdir=$(mktemp -d)
cleanup() {
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null
  rm -rf "$logdir"
}
trap cleanup EXIT

if ! ip netns add "$nsA" 2>"$logdir/err" || ! ip netns add "$nsB" 2>>"$logdir/err"; then
  echo "SKIP: cannot create network namespaces: $(cat "$logdir/err")"; exit 77
fi
ip link add "$vethA" type veth peer name "$vethB" || { echo "SKIP: cannot create a veth pair"; exit 77; }
ip link set "$vethA" netns "$nsA"
ip link set "$vethB" netns "$nsB"
ip -n "$nsA" addr add "$addrA/24" dev "$vethA"
ip -n "$nsB" addr add "$addrB/24" dev "$vethB"
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up; done
ip -n "$nsA" link set "$vethA" up
ip -n "$nsB" link set "$vethB" up

port=$((20000 + suffix % 20000))
world=4
pids=()
start_rank() {  # ns ifname rank
  ip netns exec "$1" env RANK="$3" WORLD_SIZE=$world MASTER_ADDR=$addrA MASTER_PORT=$port \
    COIL_SOCKET_IFNAME="$2" COIL_TIMEOUT_MS=60000 COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT,NET \
    "$rank_bin" >"$logdir/out$3" 2>"$logdir/err$3" &
  pids+=($!)
}
start_rank "$nsA" "$vethA" 0
start_rank "$nsA" "$vethA" 1
start_rank "$nsB" "$vethB" 2
start_rank "$nsB" "$vethB" 3

status=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then status=1; fi
done
for r in 0 1 2 3; do
  cat "$logdir/out$r"
  if [ $status != 0 ]; then sed "s/^/  rank $r: /" "$logdir/err$r" | tail -5; fi
done
# The transports must be the ones a two-host job gets.
grep -q "rank 0 -> rank 1 via shm" "$logdir/err0" || { echo "FAIL: ranks 0,1 (same namespace) did not use shm"; status=1; }
grep -q "rank 0 -> rank 2 via tcp" "$logdir/err0" || { echo "FAIL: ranks 0,2 (different namespaces) did not use tcp"; status=1; }
# Across hosts the express socket keeps the data sockets' send buffer (the
# loopback-sized one is for connections that stay on a host).
grep -q "connected to rank 2 (.*express send buffer [0-9]* bytes (across hosts))" "$logdir/err0" ||
  { echo "FAIL: rank 0's tcp connection to rank 2 was not sized as one across hosts"; status=1; }
[ $status = 0 ] && echo "netns: 4 ranks on 2 hosts passed"
exit $status
