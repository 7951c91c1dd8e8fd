# shellcheck shell=bash
# Sourced by the tests that need several "hosts" on one machine
# (run_hier_test.sh, tests/slurm/run_slurm_test.sh). Each host is a network
# namespace coilh<i>-<suffix> with the address <net>.<i+1>/24 on a veth
# hv<i>-<suffix>, whose other end sits in a bridge inside a hub namespace.
#
# namespace_hosts_create COUNT SUFFIX NET: makes them and sets the globals
# namespace_hosts (the namespace names, host i at index i) and namespaces
# (every namespace made, hub included, for namespace_hosts_delete). Where
# the kernel or the container refuses a step it prints "SKIP: why" and
# returns 77; a caller exits with that status.
namespace_hosts=()
namespaces=()

namespace_hosts_create() {
  local count=$1 suffix=$2 net=$3 hub h ns err
  hub=coilhub$suffix
  if ! err=$(ip netns add "$hub" 2>&1); then
    echo "SKIP: cannot create network namespaces: $err"; return 77
  fi
  namespaces+=("$hub")
  if ! { ip -n "$hub" link add br0 type bridge && ip -n "$hub" link set br0 up &&
         ip -n "$hub" link set lo up; }; then
    echo "SKIP: cannot create a bridge"; return 77
  fi
  for ((h = 0; h < count; h++)); do
    ns=coilh$h-$suffix
    ip netns add "$ns" || return 1
    namespaces+=("$ns")
    namespace_hosts+=("$ns")
    if ! ip link add "hv$h-$suffix" type veth peer name "hb$h-$suffix"; then
      echo "SKIP: cannot create veth pairs"; return 77
    fi
    ip link set "hv$h-$suffix" netns "$ns"
    ip link set "hb$h-$suffix" netns "$hub"
    ip -n "$hub" link set "hb$h-$suffix" master br0
    ip -n "$hub" link set "hb$h-$suffix" up
    ip -n "$ns" addr add "$net.$((h + 1))/24" dev "hv$h-$suffix"
    ip -n "$ns" link set "hv$h-$suffix" up
    ip -n "$ns" link set lo up
  done
}

namespace_hosts_delete() {
  local ns
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
}
