#!/bin/sh
# Runs inside the guest of tests/numa/meson.build (tools/rxe/guest-run --smp 6
# --numa-nodes 2 --memoryless-nodes 1 --memory-only-nodes 1):
# numa_machine_test over shm and tcp, its binding tests once more over ib on
# rxe0 when coil has the ib transport, and coil-topo, which must show the
# four nodes, their CPUs and memory (none on node 2, no CPUs on node 3) and
# the distance matrix, and, in a cgroup whose cpuset allows CPUs 0-1, which
# CPUs the cpuset leaves out.
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
# In a cgroup whose cpuset allows CPUs 0-1 only, as a container's or a batch
# job's: hwloc leaves the other CPUs out, and node 1 must not pass for a
# node of memory only.
cg=/sys/fs/cgroup
if mkdir -p $cg && mount -t cgroup2 none $cg && echo +cpuset > $cg/cgroup.subtree_control &&
   mkdir $cg/job && echo 0-1 > $cg/job/cpuset.cpus; then
  # shellcheck disable=SC2016  # $$ is the inner shell's, which then becomes coil-topo
  sh -c 'echo $$ > /sys/fs/cgroup/job/cgroup.procs && exec "$1"' sh "$topo" > /tmp/topo_cpuset.txt 2>&1 ||
    { echo "FAIL: coil-topo in a cpuset: exit $?"; fail=1; }
  cat /tmp/topo_cpuset.txt
  for want in "  node 0: CPUs 0-1, " "  node 1: no CPUs in this process's cpuset (2-3 outside it), " \
              "  node 3: no CPUs (memory only), "; do
    grep -qF -- "$want" /tmp/topo_cpuset.txt ||
      { echo "FAIL: coil-topo in a cpuset of CPUs 0-1 does not say \"$want\""; fail=1; }
  done
else
  echo "FAIL: cannot make a cgroup with a cpuset of CPUs 0-1"; fail=1
fi
[ $fail = 0 ] && echo "numa_guest: passed"
exit $fail
