#!/usr/bin/env bash
# All-reduce (or all-gather) across "hosts" joined by a slow link, on one machine: network
# namespaces joined by a veth pair act as hosts, a token bucket (tc tbf)
# on both ends caps the link's rate, as a cluster's inter-host link is slow
# against the hosts' shared memory; --delay adds netem's one-way delay
# under it, on a kernel that has sch_netem. (The development VM's has not.
# Debian's kernel in the qemu guest of tools/rxe has, but its timings mean
# little: under TCG coil's sendrecv measured ~30 MB/s one way both with
# tbf at 1 Gbit/s (125 MB/s) and at 100 Mbit/s (12.5 MB/s), 2026-12-07.)
# Ranks in one namespace talk over shm, across over
# tcp. For each size and algorithm (COIL_ALGO), coil_perf's busbw of the
# collective (--collective allreduce, the default, or allgather); first, the
# link as coil's tcp sees it (sendrecv between one rank per host), so every
# figure can be read against what the link gives.
#
#   benchmarks/netns/two_hosts_shaped.sh [--rate 1gbit] [--delay 0.2ms] [--per-host 2] [--sizes "64K 4M 64M"] [--algos "ring tree"] [--iters 5] [--collective allgather] [--peakrate R | --no-peakrate] [--placement block|cyclic]
#
# --placement: block (default) numbers the ranks host by host; cyclic deals
# them to the hosts in turn (0, 2, ... on one; 1, 3, ... on the other), as
# mpirun --map-by node and Slurm's cyclic distribution do.
#
# --peakrate (default: 1% over --rate): the bucket's burst drains at this
# rate, no faster (tbf's second bucket, one 64 KiB segment deep). Without it
# (--no-peakrate) a message that fits the 256 KiB burst crosses at the
# speed of memory, which no real link does: the 64 KiB all-gather then ran
# 1.4x faster flat than hierarchical, against every other size.
#
# Needs root and iproute2 (ip, tc); addresses stay inside the
# namespaces it makes. docs/performance.md derives the bounds.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
perf=${COIL_PERF:-$root/build/benchmarks/perf/coil_perf}
rate=1gbit delay="" perHost=2 sizes="64K 4M 64M" algos="ring hier auto" iters=5 coll=allreduce peak=default
placement=block
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --per-host) perHost=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --collective) coll=$2; shift 2 ;;
    --peakrate) peak="peakrate $2 mtu 64kb"; shift 2 ;;
    --no-peakrate) peak=""; shift ;;
    --placement) placement=$2; shift 2 ;;
    *) echo "usage: $0 [--rate R] [--delay D] [--per-host N] [--sizes S] [--algos A] [--iters N] [--collective C] [--peakrate R | --no-peakrate] [--placement block|cyclic]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 77; }
if [ "$peak" = default ]; then
  peak="peakrate $(echo "$rate" | sed -E 's/^([0-9.]+)(.*)$/\1 \2/' | awk '{printf "%g%s", $1 * 1.01, $2}') mtu 64kb"
fi
[ -x "$perf" ] || { echo "no coil_perf at $perf (build first, or set COIL_PERF)" >&2; exit 1; }

suffix=$$
nsA=coilsA$suffix nsB=coilsB$suffix vethA=csa$suffix vethB=csb$suffix
addrA=10.214.9.1 addrB=10.214.9.2
logdir=$(mktemp -d)
cleanup() { ip netns del "$nsA" 2>/dev/null; ip netns del "$nsB" 2>/dev/null; rm -rf "$logdir"; }
trap cleanup EXIT
ip netns add "$nsA" && ip netns add "$nsB" || exit 1
ip link add "$vethA" type veth peer name "$vethB" || exit 1
ip link set "$vethA" netns "$nsA"; ip link set "$vethB" netns "$nsB"
ip -n "$nsA" addr add "$addrA/24" dev "$vethA"; ip -n "$nsB" addr add "$addrB/24" dev "$vethB"
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up; done
ip -n "$nsA" link set "$vethA" up; ip -n "$nsB" link set "$vethB" up
# Burst: a few 64 KiB TSO segments; latency: how long a packet may queue.
for pair in "$nsA $vethA" "$nsB $vethB"; do
  set -- $pair
  ip netns exec "$1" tc qdisc add dev "$2" root handle 1: tbf rate "$rate" burst 256kb latency 20ms $peak ||
    { echo "tc tbf failed" >&2; exit 1; }
  # netem under tbf: each packet is held for the delay, then leaves at the
  # rate (limit: packets netem may hold; 1 Gbit/s for 0.2 ms is ~20 of them).
  [ -z "$delay" ] || ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 handle 10: netem delay "$delay" limit 10000 ||
    { echo "tc netem failed (a kernel without sch_netem?)" >&2; exit 1; }
done

port=$((21000 + suffix % 20000))
# run WORLD COLLECTIVE SIZE [ENV...]: ranks 0..perHost-1 in A, the rest in B
# (cyclic: even ranks in A, odd in B); prints rank 0's result row.
run() {
  local world=$1 coll=$2 size=$3; shift 3
  local pids=() r ns ifname
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    local inA=$((r < world / 2))
    [ "$placement" = cyclic ] && inA=$((r % 2 == 0))
    if [ $inA = 1 ]; then ns=$nsA ifname=$vethA; else ns=$nsB ifname=$vethB; fi
    ip netns exec "$ns" env RANK=$r WORLD_SIZE=$world MASTER_ADDR=$addrA MASTER_PORT=$port \
      COIL_SOCKET_IFNAME=$ifname "$@" \
      "$perf" -C "$coll" -b "$size" -e "$size" -n "$iters" -w 1 -c 1 -T 120 >"$logdir/out$r" 2>"$logdir/err$r" &
    pids+=($!)
  done
  local status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  if [ $status != 0 ]; then echo "  FAILED: $coll $size $*"; tail -3 "$logdir"/err*; return 1; fi
  grep -E "^ +[0-9]+ " "$logdir/out0" | tail -1
}

echo "# two hosts x $perHost ranks ($placement placement), link: tbf rate $rate${peak:+ ($peak)}${delay:+, netem delay $delay} each way; $(date -u '+%F %H:%M') UTC"
echo "# the link as coil's tcp sees it: sendrecv, one rank per host (busbw = bytes one way / time)"
for size in $sizes; do echo "sendrecv $size: $(run 2 sendrecv "$size")"; done
echo "# $coll, $((2 * perHost)) ranks"
# "auto": no COIL_ALGO, the cost model chooses (rank 0's COLL log names it).
for algo in $algos; do
  for size in $sizes; do
    if [ "$algo" = auto ]; then
      row=$(run $((2 * perHost)) "$coll" "$size" COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=COLL)
      # The algorithm of most of its calls (coil_perf adds a few small ones of its own).
      # A FIFO program's line ends ", chunk ..."; the all-reduce's one-shot and
      # slice say "through ..." (as does the one-shot that a rooted call's
      # ranks agree with first: not its algorithm).
      lines=", chunk"
      [ "$coll" = allreduce ] && lines=", chunk\| through"
      chose=$(grep -o "$coll [^:]*: [a-z]*\($lines\)" "$logdir/err0" | sed 's/\(, chunk\| through\)$//' |
              awk '{print $NF}' | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
      echo "$coll auto($chose) $size: $row"
    else
      echo "$coll $algo $size: $(run $((2 * perHost)) "$coll" "$size" COIL_ALGO=$coll:$algo)"
    fi
  done
done
