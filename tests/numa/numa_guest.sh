#!/bin/sh
# Runs inside the guest of tests/numa/meson.build (tools/rxe/guest-run --smp 6
# --numa-nodes 2 --memoryless-nodes 1 --memory-only-nodes 1):
# numa_machine_test over shm and tcp, its binding tests once more over ib on
# rxe0 when coil has the ib transport, and coil-topo, which must show the
# four nodes, their CPUs and memory (none on node 2, no CPUs on node 3) and
# the distance matrix.
# Usage: numa_guest.sh NUMA_MACHINE_TEST COIL_TOPO [ib]
set -u
usage="usage: numa_guest.sh NUMA_MACHINE_TEST COIL_TOPO [ib]"
test_exe=${1:?$usage}
topo=${2:?$usage}
with_ib=${3:-}
fail=0
export COIL_SOCKET_IFNAME=lo
"$test_exe" || fail=1
if [ "$with_ib" = ib ]; then
  COIL_TEST_TRANSPORTS=ib COIL_IB_HCA="=$RXE_ONE_HOST_DEV" "$test_exe" --gtest_filter='*NumaBind*' ||
    fail=1
fi
"$topo" > /tmp/topo.txt 2>&1 || { echo "FAIL: coil-topo exit $?"; fail=1; }
cat /tmp/topo.txt
for want in "Packages: 3   NUMA nodes: 4   Cores: 6   PUs: 6" \
            "  node 0: CPUs 0-1, " "  node 1: CPUs 2-3, " "  node 2: CPUs 4-5, no local memory" \
            "  node 3: no CPUs (memory only), " \
            "  node0      10     21     21     31" "  node2      21     21     10     31" \
            "  node3      31     31     31     10"; do
  grep -qF -- "$want" /tmp/topo.txt || { echo "FAIL: coil-topo does not say \"$want\""; fail=1; }
done
[ $fail = 0 ] && echo "numa_guest: passed"
exit $fail
