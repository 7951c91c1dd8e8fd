#!/usr/bin/env bash
# The hierarchical all-reduce, all-gather, reduce-scatter, broadcast and
# reduce, and point-to-point messages, across "hosts" made of network namespaces (each host's veth ends
# on a bridge in a hub namespace), several ranks per host: 2 x 2, 3 x 2, 2
# hosts of 3 and 2 ranks (one host short a rank), and 2 x 2 with the ranks
# dealt to the hosts in turn (0 and 2 on one, 1 and 3 on the other). Each
# layout runs twice: every collective forced to hier (COIL_ALGO), then the
# cost model's own choice; then rank 0 alone on a host and 2 ranks on
# another, the model's choice. Every rank checks every dtype (and op) at
# awkward counts against the independent reference.
#
# Needs root and iproute2; otherwise exits 77 (skipped) and says why.
# Then coil-topo --comm on 3 + 2 ranks must report shm inside each host and
# tcp across, saying shm cannot reach another host.
# Usage: run_hier_test.sh <path to hier_rank> [<path to coil-topo>]
set -u
rank_bin=${1:?usage: run_hier_test.sh HIER_RANK_BINARY [COIL_TOPO]}
topo_bin=${2:-}
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: needs iproute2 (ip)"; exit 77; fi

# shellcheck source=namespace_hosts.sh
source "$(dirname "$0")/namespace_hosts.sh"
suffix=$$
logdir=$(mktemp -d)
cleanup() {
  namespace_hosts_delete
  rm -rf "$logdir"
}
trap cleanup EXIT

net=10.215.$((suffix % 200))
namespace_hosts_create 3 "$suffix" "$net" || exit $?

port=$((22000 + suffix % 20000))
status=0
forced=COIL_ALGO=allreduce:hier,allgather:hier,reducescatter:hier,broadcast:hier,reduce:hier
# run_layout "2 2" [ENV...]: ranks per host, hosts in order; ranks numbered
# host by host, or (layout "2 2 cyclic") dealt to the hosts in turn.
run_layout() {
  local layout=$1; shift
  local counts=(${layout% cyclic}) world=0 h r pids=()
  for c in "${counts[@]}"; do world=$((world + c)); done
  port=$((port + 1))
  rm -f "$logdir"/out* "$logdir"/err*  # a larger layout's files would count too
  for ((r = 0; r < world; r++)); do
    if [ "${layout% cyclic}" != "$layout" ]; then
      h=$((r % ${#counts[@]}))
    else
      local before=0
      for ((h = 0; h < ${#counts[@]}; h++)); do
        before=$((before + counts[h])); [ $r -lt $before ] && break
      done
    fi
    ip netns exec "coilh$h-$suffix" env RANK=$r WORLD_SIZE=$world MASTER_ADDR=$net.1 MASTER_PORT=$port \
      COIL_SOCKET_IFNAME="hv$h-$suffix" COIL_TIMEOUT_MS=120000 COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=COLL "$@" \
      "$rank_bin" >"$logdir/out$r" 2>"$logdir/err$r" &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  # Which algorithm the all-reduces ran (COLL lines: "...: <algorithm>, chunk ...").
  local ran
  ran=$(grep -ho "allreduce [^:]*: [a-z]*, chunk" "$logdir/err0" | awk '{print $(NF-1)}' | tr -d , | sort | uniq -c | tr '\n' ' ')
  if [ "${1:-}" = "$forced" ]; then
    for coll in allreduce allgather reducescatter broadcast reduce; do
      if ! grep -q "^.*$coll [^:]*: hier, chunk" "$logdir/err0"; then
        echo "FAIL: hosts of [$layout] ranks: COIL_ALGO=$coll:hier did not run hier"; failed=1
      fi
    done
  fi
  if [ $failed = 0 ]; then
    local how=${*:-the model chooses}
    # Point-to-point batches ("point-to-point: N operation(s), M on the
    # caller-driven paths"): rank 0 has peers on other hosts in every
    # layout, so some of its messages must take tcp's express sockets.
    local p2p
    p2p=$(grep -ho "point-to-point: [0-9]* operation(s), [0-9]* on" "$logdir/err0" |
      awk '{t += $2; c += $4} END {print c + 0 " of " t + 0}')
    if [ "${p2p%% *}" = 0 ]; then
      echo "FAIL: hosts of [$layout] ranks: no message of rank 0 took a caller-driven path ($p2p)"
      status=1
    fi
    echo "hosts of [$layout] ranks, $how: $(grep -h "all-reduces" "$logdir"/out* | awk '{s += $5; g += $7; r += $9; b += $11; m += $15} END {print s " all-reduces, " g " all-gathers, " r " reduce-scatters, " b " broadcasts and reduces and " m " messages"}') checked on $world ranks, all right (rank 0's all-reduces ran: $ran; its point-to-point operations on caller-driven paths: $p2p)"
  else
    echo "FAIL: hosts of [$layout] ranks, $*"
    for ((q = 0; q < world; q++)); do cat "$logdir/out$q"; sed "s/^/  rank $q: /" "$logdir/err$q" | tail -5; done
    status=1
  fi
}
for layout in "2 2" "2 2 2" "3 2" "2 2 cyclic"; do
  run_layout "$layout" "$forced"
  run_layout "$layout"
done
# Rank 0 alone on its host: its peers are all tcp, the others' are not.
# Whatever runs where every peer has a caller-driven path (tcp's express
# sockets) must be what every rank runs (the cost model is rank 0's).
run_layout "1 2"
# coil-topo --comm on 3 + 2 ranks: rank 0's report, checked.
if [ -n "$topo_bin" ]; then
  port=$((port + 1))
  pids=() r=0
  for h in 0 1; do
    for ((k = 0; k < 3 - h; k++)); do
      ip netns exec "coilh$h-$suffix" env RANK=$r WORLD_SIZE=5 MASTER_ADDR=$net.1 MASTER_PORT=$port \
        COIL_SOCKET_IFNAME="hv$h-$suffix" COIL_TIMEOUT_MS=120000 "$topo_bin" --comm \
        >"$logdir/topo$r" 2>"$logdir/topoerr$r" &
      pids+=($!)
      r=$((r + 1))
    done
  done
  failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  if [ $failed = 0 ] && grep -q "^rank 0 *X *shm *shm *tcp *tcp" "$logdir/topo0" &&
     grep -q "^rank 4 *tcp *tcp *tcp *shm *X" "$logdir/topo0" &&
     grep -q "tcp, not shm: another host" "$logdir/topo0"; then
    echo "coil-topo --comm on 3 + 2 ranks: shm inside each host, tcp across (not shm: another host)"
  else
    echo "FAIL: coil-topo --comm on 3 + 2 ranks"; cat "$logdir/topo0"; tail -3 "$logdir"/topoerr*
    status=1
  fi
fi
[ $status = 0 ] && echo "netns hierarchical: every layout passed"
exit $status
