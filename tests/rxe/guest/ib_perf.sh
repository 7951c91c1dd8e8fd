#!/bin/sh
# rxe_ib_perf, the one part of the rxe_perf benchmark (tests/rxe/meson.build):
# coil's all-reduce over ib beside perftest's ib_write_bw, in
# the same guest, on the same two-host link (rxe1 in netns hosta ->
# rxe2 in netns hostb, over the veth pair). Soft-RoCE under emulation is
# slow and noisy (ib_write_bw alone moves 0.2-0.4 Gb/s from one run to the
# next); only ratios of medians over interleaved rounds mean anything.
# Prints per size
#   RXE-IB_PERF bytes=<n> rounds=<k> ib_write_bw_gbps=<median y> allreduce_busbw_gbps=<median x> ratio=<x/y> allreduce_round_ratios=<min>-<max> broadcast_busbw_gbps=<median z> ratio=<z/y>
# 2 ranks: busbw = algbw, and each rank sends the whole buffer's worth
# once (reduce-scatter half, all-gather half), as ib_write_bw moves it once;
# but both directions at once, where ib_write_bw is one-way.
# And sendrecv (both ranks send at once) from registered buffers (-R 1,
# the zero-copy path) against the same from unregistered ones (the slots):
#   RXE-IB_DIRECT bytes=<n> sendrecv_direct_gbps=<a> sendrecv_slots_gbps=<b> direct_over_slots=<a/b>
# And rxe's retransmission counters over the whole run (both devices):
#   RXE-IB_RETRIES out_of_seq_request=<n> completer_retry_err=<n> duplicate_request=<n> rps_cpus=<mask>
# Exits non-zero only when a run fails (the ratio is reported, not judged:
# a loaded CI machine moves it; docs/performance.md records measured ones).
# Usage: ib_perf.sh COIL_PERF
set -u
perf=${1:?usage: ib_perf.sh COIL_PERF}
here=$(dirname "$0")
. "$here/lib.sh"
# 4 and 16 MiB by default: each size costs about a minute of emulated
# time in CI. RXE_PERF_SIZES="4194304 16777216 67108864" in the guest adds 64 MiB (the
# runs docs/performance.md quotes).
sizes="${RXE_PERF_SIZES:-4194304 16777216}"
largest=$(echo $sizes | tr ' ' '\n' | sort -n | tail -1)
# Rounds of (ib_write_bw, coil): each about 20-70 s of emulated time at the
# default sizes. One in the suite, which checks that every path runs and
# prints its ratio (CI time); RXE_PERF_ROUNDS=3 or more for figures worth
# quoting (docs/performance.md's).
rounds="${RXE_PERF_ROUNDS:-1}"

# Receive packet steering on both veths, over every CPU. Without it veth
# hands a packet to the backlog of the CPU that sent it, and rxe sends one
# queue pair's packets from whichever CPU runs its requester at the time
# (the poster's, or a softirq's), so with both directions busy the two
# CPUs' backlogs reorder a flow: the responder NAKs, the requester goes
# back N (rxe's out_of_seq_request, rcvd_seq_err counters), and sometimes
# it waits for the 67 ms retry timer. A wire never reorders a flow; RPS
# keeps each flow on one CPU (a hash of its UDP ports), as a real NIC's
# RSS would. It applies to ib_write_bw and coil alike.
rps_mask=$(printf '%x' $(( (1 << $(nproc)) - 1 )))
for n in "$RXE_HOST_A_NETDEV" "$RXE_HOST_B_NETDEV"; do
  echo "$rps_mask" > "/sys/class/net/$n/queues/rx-0/rps_cpus" || echo "note: cannot set RPS on $n"
done
# rxe's retransmission counters, summed over both devices.
retries() {
  for c in out_of_seq_request completer_retry_err duplicate_request; do
    t=0
    for d in "$RXE_HOST_A_DEV" "$RXE_HOST_B_DEV"; do
      f=/sys/class/infiniband/$d/ports/1/hw_counters/$c
      [ -r "$f" ] && t=$((t + $(cat "$f")))
    done
    printf '%s=%s ' "$c" "$t"
  done
}
retries0=$(retries)

# ib_write_bw and coil's collectives in alternation, RXE_PERF_ROUNDS times;
# medians of each (emulation is noisy: a round's neighbours share its
# machine load).
wbw_run() {
  echo "== ib_write_bw, two hosts, $1 (t=$(uptime_s) s)"
  # shellcheck disable=SC2086
  sh "$here/ib_write_bw.sh" $sizes > /tmp/wbw.$1 2>&1 || { cat /tmp/wbw.$1; echo "FAIL: ib_write_bw"; exit 1; }
  grep RXE-IB_WRITE_BW /tmp/wbw.$1
}
# coil_perf over ib, two hosts, 2 ranks: ARGS... (COIL_* settings via env).
coil_run() {  # output-file, coil_perf args...
  out=$1; shift
  port=$((port + 1))
  for r in 0 1; do
    if [ $r = 0 ]; then run=in-host-a dev=$RXE_HOST_A_DEV; else run=in-host-b dev=$RXE_HOST_B_DEV; fi
    $run env RANK=$r WORLD_SIZE=2 MASTER_ADDR="$RXE_HOST_A_IP" MASTER_PORT=$port \
      COIL_IB_HCA="=$dev" COIL_SOCKET_IFNAME=eth0 COIL_TIMEOUT_MS=300000 \
      timeout 400 "$perf" -b 4M -e "$largest" -f 4 -n 2 -w 1 -c 0 --transport ib "$@" > "$out.$r" 2>&1 &
    eval "pid$r=$!"
  done
  st=0
  wait "$pid0" || st=1
  wait "$pid1" || st=1
  cat "$out.0"
  [ $st = 0 ] || { tail -5 "$out.1"; echo "FAIL: coil_perf over ib $*"; exit 1; }
}
port=29455
round=1
while [ $round -le "$rounds" ]; do
  wbw_run $round
  echo "== round $round: coil_perf over ib, two hosts, 2 ranks (t=$(uptime_s) s)"
  if [ $round = 1 ]; then
    coil_run /tmp/perf.$round -C allreduce,broadcast,sendrecv -R 1
  else
    coil_run /tmp/perf.$round -C allreduce,broadcast -R 1
  fi
  round=$((round + 1))
done
echo "== round 1's sendrecv from unregistered buffers: through the slots (t=$(uptime_s) s)"
coil_run /tmp/slots -C sendrecv -R 0

# Out-of-place time (µs) -> Gb/s. All-reduce rows have op "sum"; broadcast
# rows ("none", then the root) move the buffer one way, as ib_write_bw does.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for bytes in $sizes; do
  : > /tmp/wbw.col; : > /tmp/ar.col; : > /tmp/bc.col; : > /tmp/ratio.col
  round=1
  while [ $round -le "$rounds" ]; do
    w=$(sed -n "s/^RXE-IB_WRITE_BW .*bytes=$bytes .*gbps=\([0-9.]*\).*/\1/p" /tmp/wbw.$round)
    a=$(awk -v b="$bytes" '$1 == b && $4 == "sum" { printf "%.3f", b * 8 / $5 / 1000 }' /tmp/perf.$round.0)
    # Broadcast rows carry a root column, sendrecv rows none; both say "none".
    c=$(awk -v b="$bytes" '$1 == b && $4 == "none" && NF == 13 { printf "%.3f", b * 8 / $6 / 1000 }' /tmp/perf.$round.0)
    echo "$w" >> /tmp/wbw.col; echo "$a" >> /tmp/ar.col; echo "$c" >> /tmp/bc.col
    awk -v c="$a" -v w="$w" 'BEGIN { if (w > 0) printf "%.2f\n", c / w }' >> /tmp/ratio.col
    round=$((round + 1))
  done
  wbw=$(median < /tmp/wbw.col); ar=$(median < /tmp/ar.col); bc=$(median < /tmp/bc.col)
  range=$(sort -n /tmp/ratio.col | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }')
  sr=$(awk -v b="$bytes" '$1 == b && $4 == "none" && NF == 12 { printf "%.3f", b * 8 / $5 / 1000 }' /tmp/perf.1.0)
  slots=$(awk -v b="$bytes" '$1 == b && $4 == "none" { printf "%.3f", b * 8 / $5 / 1000 }' /tmp/slots.0)
  ratio() { awk -v c="$1" -v w="$wbw" 'BEGIN { if (w > 0) printf "%.2f", c / w; else print "n/a" }'; }
  echo "RXE-IB_PERF bytes=$bytes rounds=$rounds ib_write_bw_gbps=$wbw allreduce_busbw_gbps=$ar ratio=$(ratio "$ar") allreduce_round_ratios=$range broadcast_busbw_gbps=$bc ratio=$(ratio "$bc")"
  echo "RXE-IB_DIRECT bytes=$bytes sendrecv_direct_gbps=$sr sendrecv_slots_gbps=$slots direct_over_slots=$(awk -v a="$sr" -v b="$slots" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
done
# Counters over the whole test (each guest boots fresh: they start at 0).
# With RPS out_of_seq_request stays 0; retries left are the retry timer's.
echo "RXE-IB_RETRIES $(retries)rps_cpus=$rps_mask (at start: $retries0)"
echo "rxe_ib_perf: passed"
