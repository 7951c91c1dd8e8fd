#!/bin/sh
# rxe_topo: coil-topo's RDMA section on a real kernel's sysfs (rxe0-2), held
# against ibv_devinfo: every device listed as a software device over its
# interface, port 1 ACTIVE with ibv_devinfo's active MTU, and the same GID
# indexes with the same types. Also: --json runs, and no GPU is claimed.
# Usage: topo.sh COIL_TOPO
set -u
topo=${1:?usage: topo.sh COIL_TOPO}
fail=0
"$topo" > /tmp/topo.txt 2>&1 || { echo "FAIL: coil-topo exit $?"; fail=1; }
cat /tmp/topo.txt
"$topo" --json > /tmp/topo.json 2>&1 || { echo "FAIL: coil-topo --json exit $?"; fail=1; }
grep -q '"rdma": {"read": true' /tmp/topo.json ||
  { echo "FAIL: --json has no RDMA devices read"; fail=1; }
grep -q "no GPU found (hwloc saw no NVIDIA PCI display device)" /tmp/topo.txt ||
  { echo "FAIL: the guest has no GPU and coil-topo does not say so"; fail=1; }
ibv_devinfo -v > /tmp/devinfo 2>&1 || { echo "FAIL: ibv_devinfo"; cat /tmp/devinfo; exit 1; }
for d in rxe0 rxe1 rxe2; do
  mtu=$(awk -v d="$d" '/hca_id:/ { cur = $2 }
                       cur == d && /active_mtu:/ { print $2; exit }' /tmp/devinfo)
  # "GID[  1]:  ::ffff:10.77.0.1, RoCE v2" -> "1 RoCE v2"
  want=$(awk -v d="$d" '/hca_id:/ { cur = $2 } cur == d && /GID\[/ {
           i = $0; sub(/.*GID\[ */, "", i); sub(/\].*/, "", i)
           t = $0; sub(/.*, /, "", t); print i, t }' /tmp/devinfo)
  # The device's block of coil-topo's text: its line, its port line, its GID table.
  block=$(awk -v d="$d" '$0 ~ "^  "d": " { on = 1; print; next }
                         on && /^  [^ ]/ { on = 0 }
                         on { print }' /tmp/topo.txt)
  echo "$block" | grep -q "^  $d: software device over " ||
    { echo "FAIL: $d not listed as a software device over its interface"; fail=1; }
  echo "$block" | grep -q "port 1: ACTIVE (LinkUp), link layer Ethernet, active MTU $mtu " ||
    { echo "FAIL: $d port 1: want ACTIVE, Ethernet, MTU $mtu (ibv_devinfo)"; fail=1; }
  got=$(echo "$block" | awk '/^      [0-9]/ { printf "%s %s %s\n", $1, $2, $3 }')
  if [ -z "$want" ] || [ "$got" != "$want" ]; then
    echo "FAIL: $d GIDs (index type): coil-topo"; echo "$got"
    echo "ibv_devinfo:"; echo "$want"; fail=1
  fi
done
[ $fail = 0 ] && echo "rxe_topo: passed (rxe0-2 match ibv_devinfo)"
exit $fail
