#!/usr/bin/env bash
# coil under a real Slurm: slurmctld and two slurmd on two "hosts" made of
# network namespaces (tests/netns/namespace_hosts.sh), each with its own
# host name and an /etc/hosts that names both, as a cluster's DNS would.
# What users do there, checked:
#   - coil_perf run straight from an sbatch script (no srun): it forks its
#     ranks (the batch shell has SLURM_PROCID=0 and SLURM_NTASKS but is no
#     task of a launch; coil took it for rank 0 of N and waited);
#   - srun -N 2 -n 4 with no MASTER_ADDR, MASTER_PORT or COIL_* variable:
#     the hierarchical collectives, every dtype and op against the reference
#     (hier_rank), with the tasks in blocks and dealt in turn (-m cyclic);
#     3 tasks on 2 nodes, also with Slurm's PMI (srun --mpi=pmi2); a
#     coil_perf sweep with its results checked;
#     coil-topo --comm's report of shm within a node and tcp across;
#   - srun -m arbitrary with task 0 on the second node: rank 0 names both
#     nodes and fails, instead of the others waiting for a root elsewhere;
#   - mpirun inside an sbatch job of 2 nodes (Open MPI starts its daemon
#     there with srun): coil_perf, and a program's coilCommInitFromEnv,
#     which needs MASTER_ADDR across nodes and says so; and MPICH's mpiexec (hydra starts its proxies with
#     srun, whose step variables the ranks inherit);
#   - torch.distributed under srun, as cluster docs show it (RANK from
#     SLURM_PROCID, MASTER_ADDR from scontrol): coil's results equal gloo's;
#   - the multi-node torchrun recipe: srun starts one torchrun per node,
#     which meet by c10d rendezvous and run coil_perf's 4 ranks.
# Authentication is auth/none: the daemons and the jobs are this test's own.
#
# Needs root, iproute2, unshare and Slurm (Debian: slurmctld slurmd
# slurm-client); otherwise exits 77 and says why.
# Usage: run_slurm_test.sh LAUNCHER_RANK HIER_RANK COIL_PERF COIL_TOPO [PYTHON TORCH_EXT_DIR PYTHONPATH]
set -u
launcher_rank=${1:?usage: run_slurm_test.sh LAUNCHER_RANK HIER_RANK COIL_PERF COIL_TOPO [PYTHON EXT_DIR PYTHONPATH]}
hier_rank=${2:?} perf=${3:?} topo=${4:?} python=${5:-} torch_ext=${6:-} torch_path=${7:-}
launcher_rank=$(realpath "$launcher_rank") hier_rank=$(realpath "$hier_rank") perf=$(realpath "$perf")
topo=$(realpath "$topo")
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces and the Slurm daemons"; exit 77; fi
for tool in ip nsenter unshare slurmctld slurmd srun sbatch scontrol sinfo; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: needs $tool (Debian: apt-get install iproute2 util-linux slurmctld slurmd slurm-client)"
    exit 77
  fi
done

# shellcheck source=../netns/namespace_hosts.sh
source "$here/../netns/namespace_hosts.sh"
suffix=$$
logdir=$(mktemp -d)
chmod 755 "$logdir"
daemons=()
cleanup() {
  # Jobs first (a step that outlived its check would keep its slurmstepd),
  # then the daemons; anything still reading this test's slurm.conf last.
  if [ ${#daemons[@]} -gt 0 ]; then on_node 0 scancel -p test 2>/dev/null; fi
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null; done
  pkill -f -- "-f $logdir/slurm.conf" 2>/dev/null
  namespace_hosts_delete
  rm -rf "$logdir"
}
trap cleanup EXIT

net=10.216.$((suffix % 200))
namespace_hosts_create 2 "$suffix" "$net" || exit $?
nodes=("cn0-$suffix" "cn1-$suffix")
printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$net.1" "${nodes[0]}" "$net.2" "${nodes[1]}" > "$logdir/hosts"
cpus=$(nproc)
cat > "$logdir/slurm.conf" <<CONF
ClusterName=coiltest
SlurmctldHost=${nodes[0]}($net.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$logdir/state
SlurmdSpoolDir=$logdir/spool-%n
SlurmctldPidFile=$logdir/slurmctld.pid
SlurmdPidFile=$logdir/slurmd-%n.pid
SlurmctldLogFile=$logdir/slurmctld.log
SlurmdLogFile=$logdir/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=${nodes[0]} NodeAddr=$net.1 CPUs=$cpus State=UNKNOWN
NodeName=${nodes[1]} NodeAddr=$net.2 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$logdir/slurm.conf

# node_command I CMD...: sets node_cmd to CMD run on host I, under that
# host's name and /etc/hosts. nsenter, not `ip netns exec`: that mounts a
# sysfs of the namespace's own, without /sys/fs/cgroup, and slurmd will not
# start without it. Every step execs the next, so a background node_cmd's
# $! is the daemon itself.
node_command() {
  local h=$1; shift
  node_cmd=(nsenter --net="/run/netns/${namespace_hosts[$h]}" unshare --uts --mount
    sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'
    sh "${nodes[$h]}" "$logdir/hosts" "$@")
}
on_node() {
  node_command "$@"
  "${node_cmd[@]}"
}
# start_daemon I NAME: Slurm's daemon NAME on host I, in the foreground (-D).
start_daemon() {
  node_command "$1" "$2" -D -f "$SLURM_CONF"
  "${node_cmd[@]}" > "$logdir/$2$1.out" 2>&1 &
  daemons+=($!)
}

start_daemon 0 slurmctld
for h in 0 1; do start_daemon "$h" slurmd; done
idle=0
for _ in $(seq 60); do
  idle=$(on_node 0 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
  [ "$idle" = 2 ] && break
  sleep 0.5
done
if [ "$idle" != 2 ]; then
  echo "FAIL: the two slurmd did not register with slurmctld in 30 s"
  tail -n 5 "$logdir"/*.log "$logdir"/*.out
  exit 1
fi
echo "slurm: slurmctld and slurmd on ${nodes[*]} ($(slurmctld -V))"

status=0
# check NAME STEP-OUTPUT-PREFIX CMD...: runs CMD on node 0 (its output in
# PREFIX.out; srun's tasks write PREFIX-<task>.out/.err), PASS on status 0.
check() {
  local name=$1 prefix=$logdir/$2; shift 2
  if on_node 0 timeout 300 "$@" > "$prefix.out" 2>&1; then
    echo "PASS: $name"
    return 0
  fi
  echo "FAIL: $name"
  tail -n 5 "$prefix"*
  status=1
  return 1
}
# srun's tasks: one output and error file each; INIT lines say the transports.
# shellcheck disable=SC2054  # --export takes a comma-separated list
step=(srun -N 2 --overcommit --kill-on-bad-exit=1 --export=ALL,COIL_DEBUG=INFO,COIL_DEBUG_SUBSYS=INIT)

# 1. coil_perf straight from the batch script: it forks 2 ranks.
cat > "$logdir/batch.sh" <<JOB
#!/bin/sh
exec timeout 120 "$perf" -b 8 -e 64K -f 16 -n 2 -w 1 -c 1
JOB
if check "coil_perf in an sbatch script, not under srun, forks its ranks" batch \
     sbatch -W -N 1 -n 2 -o "$logdir/batch-job.out" "$logdir/batch.sh"; then
  grep -q "launcher fork" "$logdir/batch-job.out" && grep -q "Out of bounds values : 0 OK" "$logdir/batch-job.out" ||
    { echo "FAIL: the batch job's coil_perf: $(tail -n 3 "$logdir/batch-job.out")"; status=1; }
fi

# 2. srun, no MASTER_ADDR/MASTER_PORT: hierarchical collectives, 2 + 2 ranks,
#    in blocks, then dealt in turn.
for layout in block cyclic; do
  if check "srun -N 2 -n 4 -m $layout: every collective, dtype and op checked" "hier-$layout" \
       "${step[@]}" -n 4 -m "$layout" -o "$logdir/hier-$layout-%t.out" -e "$logdir/hier-$layout-%t.err" \
       "$hier_rank"; then
    grep -q "rank 0 -> rank 1 via tcp\|rank 0 -> rank 2 via tcp" "$logdir/hier-$layout-0.err" ||
      { echo "FAIL: -m $layout: rank 0 reached no rank of the other node over tcp"; status=1; }
  fi
done
grep -q "rank 0 -> rank 1 via shm" "$logdir/hier-block-0.err" ||
  { echo "FAIL: -m block: ranks 0 and 1 (one node) did not use shm"; status=1; }
grep -q "rank 0 -> rank 2 via shm" "$logdir/hier-cyclic-0.err" ||
  { echo "FAIL: -m cyclic: ranks 0 and 2 (one node) did not use shm"; status=1; }

# 3. Three tasks on two nodes (2 + 1).
check "srun -N 2 -n 3: all-reduce, broadcast and all-gather checked" three \
  "${step[@]}" -n 3 -o "$logdir/three-%t.out" -e "$logdir/three-%t.err" "$launcher_rank"

# 3b. srun with Slurm's own PMI (--mpi=pmi2, as MPICH users start their
#     jobs): PMI_RANK and PMI_SIZE are set beside SLURM_*, and Slurm stays
#     the launcher, with its defaults for MASTER_ADDR and MASTER_PORT.
if on_node 0 srun --mpi=list 2>&1 | grep -qw pmi2; then
  if check "srun --mpi=pmi2 -N 2 -n 3: Slurm's PMI_* beside SLURM_*" pmi2 \
       "${step[@]}" --mpi=pmi2 -n 3 -o "$logdir/pmi2-%t.out" -e "$logdir/pmi2-%t.err" \
       sh -c '[ -n "$PMI_RANK" ] || { echo "no PMI_RANK under --mpi=pmi2" >&2; exit 1; }; exec "$1"' \
       sh "$launcher_rank"; then
    grep -q "launched by Slurm: rank 2 of 3" "$logdir/pmi2-2.err" ||
      { echo "FAIL: --mpi=pmi2: $(grep "launched by" "$logdir/pmi2-2.err")"; status=1; }
  fi
else
  echo "srun --mpi=pmi2 part not run: Slurm has no pmi2 plugin here"
fi

# 4. A coil_perf sweep across the nodes, results checked.
if check "srun -N 2 -n 4 coil_perf: 8 B to 4 MiB, results checked" perf \
     "${step[@]}" -n 4 -o "$logdir/perf-%t.out" -e "$logdir/perf-%t.err" \
     "$perf" -b 8 -e 4M -f 8 -n 5 -w 1 -c 1; then
  grep -q "launcher slurm" "$logdir/perf-0.out" && grep -q "Out of bounds values : 0 OK" "$logdir/perf-0.out" ||
    { echo "FAIL: coil_perf under srun: $(tail -n 3 "$logdir/perf-0.out")"; status=1; }
fi

# 4b. srun -m arbitrary with task 0 on the second node: rank 0 says it is
#     not on the first node, where the others would look for its root.
printf '%s\n%s\n' "${nodes[1]}" "${nodes[0]}" > "$logdir/arbitrary-hosts"
if on_node 0 timeout 60 env SLURM_HOSTFILE="$logdir/arbitrary-hosts" "${step[@]}" -n 2 -m arbitrary \
     -o "$logdir/arbitrary-%t.out" -e "$logdir/arbitrary-%t.err" "$launcher_rank" > "$logdir/arbitrary.out" 2>&1; then
  echo "FAIL: srun -m arbitrary with task 0 off the first node succeeded"; status=1
elif grep -q "rank 0 runs on ${nodes[1]}, not on ${nodes[0]}" "$logdir/arbitrary-0.err"; then
  echo "PASS: srun -m arbitrary, task 0 on the second node: rank 0 says so and fails"
else
  echo "FAIL: srun -m arbitrary: rank 0 did not name the nodes"; tail -n 5 "$logdir"/arbitrary*; status=1
fi

# 5. coil-topo --comm under srun: what each rank reaches and how.
if check "srun -N 2 -n 4 coil-topo --comm: shm within a node, tcp across" topo \
     "${step[@]}" -n 4 -o "$logdir/topo-%t.out" -e "$logdir/topo-%t.err" "$topo" --comm; then
  grep -q "^rank 0 *X *shm *tcp *tcp" "$logdir/topo-0.out" && grep -q "^rank 3 *tcp *tcp *shm *X" "$logdir/topo-0.out" ||
    { echo "FAIL: coil-topo --comm under srun:"; cat "$logdir/topo-0.out"; status=1; }
fi

# 6. mpirun inside an sbatch job: Open MPI finds the allocation and starts
#    its daemon on the second node with srun; coil_perf's ranks then see
#    Open MPI's variables and Slurm's (the daemon's step) at once.
if command -v mpirun > /dev/null; then
  cat > "$logdir/mpi.sh" <<JOB
#!/bin/sh
exec timeout 120 mpirun --allow-run-as-root -x COIL_DEBUG=INFO -x COIL_DEBUG_SUBSYS=INIT "$perf" -b 8 -e 1M -f 32 -n 3 -w 1 -c 1
JOB
  if check "mpirun in an sbatch job on 2 nodes: coil_perf on 4 ranks" mpi \
       sbatch -W -N 2 -n 4 -o "$logdir/mpi-job.out" "$logdir/mpi.sh"; then
    grep -q "launcher mpirun" "$logdir/mpi-job.out" && grep -q "nranks 4" "$logdir/mpi-job.out" &&
      grep -q "Out of bounds values : 0 OK" "$logdir/mpi-job.out" &&
      grep -q "rank 0 -> rank 2 via tcp" "$logdir/mpi-job.out" ||
      { echo "FAIL: mpirun in sbatch: $(tail -n 5 "$logdir/mpi-job.out")"; status=1; }
  fi
  # An MPI program's coilCommInitFromEnv across the nodes: without
  # MASTER_ADDR every rank fails at once, saying to export it (no rank
  # knows where rank 0 runs); with it, the ranks meet.
  cat > "$logdir/mpi-env.sh" <<JOB
#!/bin/sh
timeout 60 mpirun --allow-run-as-root -x COIL_TIMEOUT_MS=20000 "$launcher_rank" && exit 1
MASTER_ADDR=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
exec timeout 120 mpirun --allow-run-as-root -x MASTER_ADDR -x COIL_DEBUG=INFO -x COIL_DEBUG_SUBSYS=INIT "$launcher_rank"
JOB
  if check "mpirun across 2 nodes: coilCommInitFromEnv needs MASTER_ADDR, and meets with it" mpi-env \
       sbatch -W -N 2 -n 4 -o "$logdir/mpi-env-job.out" "$logdir/mpi-env.sh"; then
    grep -q "needs MASTER_ADDR, rank 0's host: the ranks run on more than one host" "$logdir/mpi-env-job.out" &&
      grep -q "launched by Open MPI: rank 3 of 4" "$logdir/mpi-env-job.out" ||
      { echo "FAIL: mpirun across nodes: $(tail -n 5 "$logdir/mpi-env-job.out")"; status=1; }
  fi
else
  echo "mpirun part not run: no mpirun (Debian: openmpi-bin)"
fi

# 6b. MPICH's mpiexec (hydra) inside an sbatch job: hydra starts one proxy
#     per node with srun, so the ranks inherit that step's SLURM_PROCID
#     (the node's index) and SLURM_NTASKS (2): hydra's PMI_RANK and
#     PMI_SIZE must win. MASTER_ADDR is the job's first node, as usual.
if command -v mpiexec.hydra > /dev/null; then
  cat > "$logdir/hydra.sh" <<JOB
#!/bin/sh
MASTER_ADDR=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n 1)
MASTER_PORT=\$((20000 + SLURM_JOB_ID % 10000))
export MASTER_ADDR MASTER_PORT COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT
exec timeout 120 mpiexec.hydra -n 4 "$perf" -b 8 -e 1M -f 32 -n 3 -w 1 -c 1
JOB
  if check "mpiexec.hydra (MPICH) in an sbatch job on 2 nodes: coil_perf on 4 ranks" hydra \
       sbatch -W -N 2 -n 4 -o "$logdir/hydra-job.out" "$logdir/hydra.sh"; then
    grep -q "launcher mpiexec-hydra" "$logdir/hydra-job.out" && grep -q "nranks 4" "$logdir/hydra-job.out" &&
      grep -q "Out of bounds values : 0 OK" "$logdir/hydra-job.out" &&
      grep -q "rank 0 -> rank 2 via tcp" "$logdir/hydra-job.out" ||
      { echo "FAIL: mpiexec.hydra in sbatch: $(tail -n 5 "$logdir/hydra-job.out")"; status=1; }
  fi
else
  echo "mpiexec.hydra part not run: no mpiexec.hydra (Debian: mpich)"
fi

# 7. torch.distributed under srun, the variables set as cluster docs show.
if [ -n "$python" ]; then
  check "torch under srun -N 2 -n 4: coil's results equal gloo's" torch \
    "${step[@]}" -n 4 -o "$logdir/torch-%t.out" -e "$logdir/torch-%t.err" \
    sh -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID \
      MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) \
      MASTER_PORT=$((20000 + SLURM_JOB_ID % 10000)) COIL_TORCH_EXT_DIR="$1" PYTHONPATH="$2" \
      OMP_NUM_THREADS=1 exec "$3" "$4"' sh "$torch_ext" "$torch_path" "$python" "$here/torch_ranks.py"

  # 8. The multi-node torchrun recipe: one torchrun per node started by srun,
  #    meeting through c10d rendezvous on the first node; 2 workers each.
  #    The workers see torchrun's RANK and srun's SLURM_PROCID (the node's
  #    task) and SLURM_STEP_ID at once: torchrun's must win.
  if check "srun -N 2 --ntasks-per-node 1 torchrun --nproc-per-node 2: coil_perf on 4 ranks" torchrun \
       "${step[@]}" --ntasks-per-node 1 -o "$logdir/torchrun-%t.out" -e "$logdir/torchrun-%t.err" \
       sh -c 'exec "$1" -m torch.distributed.run --nnodes 2 --nproc-per-node 2 \
         --rdzv-backend c10d --rdzv-endpoint "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):29400" \
         --rdzv-id "$SLURM_JOB_ID" --no-python "$2" -b 8 -e 1M -f 32 -n 3 -w 1 -c 1' \
       sh "$python" "$perf"; then
    grep -q "launcher torchrun" "$logdir"/torchrun-*.out && grep -q "nranks 4" "$logdir"/torchrun-*.out ||
      { echo "FAIL: torchrun under srun: coil_perf did not run as 4 torchrun ranks"; status=1; }
  fi
else
  echo "torch parts not run: coil was built without the torch adapter (-Dtorch)"
fi

[ $status = 0 ] && echo "slurm: every check passed"
exit $status
