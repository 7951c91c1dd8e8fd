#!/bin/sh
# rxe_verbs: the guest's verbs stack works before coil is put on it.
# Runs inside the rxe guest (tools/rxe/guest-run):
#   - ibv_devinfo sees rxe0, rxe1, rxe2, every port PORT_ACTIVE;
#   - ibv_rc_pingpong host A (rxe1) <-> host B (rxe2), GID index from the guest;
#   - ib_write_bw on one host (rxe0, two processes) and between the two
#     hosts (rxe1 -> rxe2 over the veth pair), BW lines printed.
set -u
here=$(dirname "$0")
# shellcheck source=tests/rxe/guest/lib.sh
. "$here/lib.sh"
fail=0
step() { echo; echo "== $* (t=$(uptime_s) s)"; }

step "ibv_devinfo"
ibv_devinfo > /tmp/devinfo 2>&1; rc=$?
cat /tmp/devinfo
for d in rxe0 rxe1 rxe2; do
  grep -q "hca_id:[[:space:]]*$d\$" /tmp/devinfo || { echo "FAIL: ibv_devinfo lists no $d"; fail=1; }
done
active=$(grep -c PORT_ACTIVE /tmp/devinfo)
if [ $rc != 0 ] || [ "$active" != 3 ]; then
  echo "FAIL: ibv_devinfo exit $rc, $active ports PORT_ACTIVE (want 3)"; fail=1
fi
echo "GIDs: rxe0 $RXE_ONE_HOST_GID, rxe1 (host A) $RXE_HOST_A_GID, rxe2 (host B) $RXE_HOST_B_GID"

step "ibv_rc_pingpong: host A (rxe1) <-> host B (rxe2)"
timeout 120 in-host-b ibv_rc_pingpong -d "$RXE_HOST_B_DEV" -g "$RXE_HOST_B_GID" -n 100 -p 18600 > /tmp/pp.server 2>&1 &
server=$!
if wait_listening in-host-b 18600 $server; then
  timeout 120 in-host-a ibv_rc_pingpong -d "$RXE_HOST_A_DEV" -g "$RXE_HOST_A_GID" -n 100 -p 18600 "$RXE_HOST_B_IP" > /tmp/pp.client 2>&1
  cs=$?
else
  cs=1
fi
wait $server; ss=$?
cat /tmp/pp.client
if [ $cs != 0 ] || [ $ss != 0 ]; then
  echo "FAIL: ibv_rc_pingpong client exit $cs, server exit $ss"; cat /tmp/pp.server; fail=1
fi

step "ib_write_bw one host (rxe0)"
sh "$here/ib_write_bw.sh" --one-host 1048576 || fail=1
step "ib_write_bw two hosts (rxe1 -> rxe2)"
sh "$here/ib_write_bw.sh" 1048576 || fail=1

echo
[ $fail = 0 ] && echo "rxe_verbs: passed" || echo "rxe_verbs: FAILED"
exit $fail
