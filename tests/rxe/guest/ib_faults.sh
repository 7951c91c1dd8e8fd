#!/bin/sh
# rxe_ib_faults: a rank killed (SIGKILL) in the middle of all-reduces over
# ib: every survivor fails with coilRemoteError naming a peer, well within
# its timeout, instead of hanging. Three ranks on rxe0, launched
# torchrun-style (one process each), rank 2 killed.
# Usage: ib_faults.sh COIL_PERF
set -u
perf=${1:?usage: ib_faults.sh COIL_PERF}
here=$(dirname "$0")
. "$here/lib.sh"
n=3 port=29377
pids=""
for r in 0 1 2; do
  env RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COIL_SOCKET_IFNAME=lo \
    COIL_TRANSPORT=ib COIL_IB_HCA="=$RXE_ONE_HOST_DEV" COIL_TIMEOUT_MS=60000 \
    timeout 120 "$perf" -b 1M -e 1M -n 100000 -w 0 -c 0 > /tmp/fault.$r 2>&1 &
  pids="$pids $!"
  eval "pid$r=$!"
done
# Kill rank 2 once the sweep is running (its header line is out).
i=0
until grep -q "time" /tmp/fault.0 2>/dev/null; do
  i=$((i + 1)); [ $i -le 1500 ] || break; sleep 0.02
done
sleep 2
start=$(uptime_s)
kill -9 "$pid2"
fail=0
for r in 0 1; do
  eval "p=\$pid$r"
  wait "$p"; st=$?
  took=$(awk -v a="$start" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }')
  tail -3 /tmp/fault.$r
  if [ $st = 0 ] || [ $st = 124 ]; then
    echo "FAIL: rank $r exited with $st (want a coil error, not success or the 120 s timeout)"; fail=1
  elif ! grep -q "coilRemoteError" /tmp/fault.$r; then
    echo "FAIL: rank $r did not report coilRemoteError"; fail=1
  else
    echo "rank $r failed with coilRemoteError ${took} s after the kill"
  fi
done
wait "$pid2" 2>/dev/null
[ $fail = 0 ] && echo "rxe_ib_faults: passed" || echo "rxe_ib_faults: FAILED"
exit $fail
