#!/bin/sh
# rxe_ib_collectives: every collective over ib, results checked bit-exactly
# by coil_perf (-c 1) against its independent reference, at awkward sizes
# (1, 7, 49, ... 117649 bytes).
#   one host:  2, 3 and 4 ranks (processes) on rxe0, COIL_TRANSPORT=ib;
#   two hosts: ranks in netns host A (rxe1) and host B (rxe2), joined by a
#              veth pair; coil chooses ib between the hosts by itself (shm
#              within one), which the INFO log must show.
# Usage: ib_collectives.sh COIL_PERF
set -u
perf=${1:?usage: ib_collectives.sh COIL_PERF}
here=$(dirname "$0")
. "$here/lib.sh"
fail=0
sweep="-C all -b 1 -e 117649 -f 7 -n 1 -w 1 -c 1"

for n in 2 3 4; do
  echo "== one host, $n ranks, COIL_TRANSPORT=ib (t=$(uptime_s) s)"
  # shellcheck disable=SC2086
  if ! COIL_IB_HCA="=$RXE_ONE_HOST_DEV" COIL_SOCKET_IFNAME=lo timeout 300 \
       "$perf" -P $n --transport ib $sweep -d float,int32 -o sum,max > /tmp/one.$n 2>&1; then
    cat /tmp/one.$n; echo "FAIL: one host, $n ranks"; fail=1
  else
    grep -E "Out of bounds|Avg bus" /tmp/one.$n
  fi
done

# Large point-to-point messages (COIL_IB_DIRECT_BYTES, 512 KiB by default)
# from registered buffers (-R 1, coilCommRegister) take the zero-copy path;
# from unregistered ones (-R 0) the slots, after the same announcement.
# sendrecv and alltoall from 256 KiB to 8 MiB, 2 and 3 ranks, checked.
for n in 2 3; do
  for reg in 1 0; do
    echo "== one host, $n ranks, large sendrecv/alltoall over ib, -R $reg (t=$(uptime_s) s)"
    if ! COIL_IB_HCA="=$RXE_ONE_HOST_DEV" COIL_SOCKET_IFNAME=lo timeout 300 \
         "$perf" -P $n --transport ib -C sendrecv,alltoall -b 256K -e 8M -f 4 -n 1 -w 1 -c 1 \
         -R $reg > /tmp/p2p.$n 2>&1; then
      cat /tmp/p2p.$n; echo "FAIL: large point-to-point, $n ranks, -R $reg"; fail=1
    else
      grep -E "Out of bounds" /tmp/p2p.$n
    fi
  done
done

# Two hosts: rank r runs in host A when r < a, else in host B.
two_hosts() {  # nranks ranks_on_a extra-args...
  n=$1 a=$2; shift 2
  port=$((29400 + n * 10 + a))
  pids=""
  r=0
  while [ $r -lt $n ]; do
    # In its namespace each host reaches the other over its eth0.
    if [ $r -lt $a ]; then run=in-host-a dev=$RXE_HOST_A_DEV
    else run=in-host-b dev=$RXE_HOST_B_DEV; fi
    # shellcheck disable=SC2086
    $run env RANK=$r WORLD_SIZE=$n MASTER_ADDR="$RXE_HOST_A_IP" MASTER_PORT=$port \
      COIL_IB_HCA="=$dev" COIL_SOCKET_IFNAME=eth0 COIL_TIMEOUT_MS=120000 \
      COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT,NET \
      timeout 300 "$perf" "$@" > /tmp/two.$n.$r 2>&1 &
    pids="$pids $!"
    r=$((r + 1))
  done
  st=0
  for p in $pids; do wait "$p" || st=1; done
  return $st
}

for layout in "2 1" "3 2" "4 2"; do
  set -- $layout
  echo "== two hosts, $1 ranks ($2 on host A) (t=$(uptime_s) s)"
  # shellcheck disable=SC2086
  if ! two_hosts "$1" "$2" $sweep -d float -o sum; then
    for f in /tmp/two.$1.*; do echo "--- $f"; tail -20 "$f"; done
    echo "FAIL: two hosts, $1 ranks"; fail=1
    continue
  fi
  grep -E "Out of bounds" /tmp/two.$1.0
  # Across the hosts coil must have chosen ib, within one host shm.
  if ! grep -q "rank 0 -> rank $(($1 - 1)) via ib" /tmp/two.$1.0; then
    grep -h "via" /tmp/two.$1.* ; echo "FAIL: rank 0 did not reach host B over ib"; fail=1
  fi
  if [ "$2" -ge 2 ] && ! grep -q "rank 0 -> rank 1 via shm" /tmp/two.$1.0; then
    grep -h "via" /tmp/two.$1.* ; echo "FAIL: ranks on one host did not use shm"; fail=1
  fi
  grep -h "ib: rank .* over " /tmp/two.$1.0 | head -2
done

echo "== two hosts, 2 ranks, large sendrecv over ib (t=$(uptime_s) s)"
if ! two_hosts 2 1 -C sendrecv -b 256K -e 8M -f 4 -n 1 -w 1 -c 1 -R 1; then
  for f in /tmp/two.2.*; do echo "--- $f"; tail -20 "$f"; done
  echo "FAIL: two hosts, large sendrecv"; fail=1
else
  grep -E "Out of bounds" /tmp/two.2.0
fi

[ $fail = 0 ] && echo "rxe_ib_collectives: passed" || echo "rxe_ib_collectives: FAILED"
exit $fail
