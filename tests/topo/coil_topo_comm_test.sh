#!/usr/bin/env bash
# coil-topo --comm as a user runs it under a launcher (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT): 3 ranks on this host choose shm, every pair,
# as the first choice; with COIL_TRANSPORT=tcp every pair says tcp, forced;
# outside a launcher it fails with a message naming what is missing.
# (Ranks on two namespace hosts: tests/netns/run_hier_test.sh.)
set -u
topo=${1:?usage: coil_topo_comm_test.sh COIL_TOPO}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
# A port nobody listens on now (meson runs other tests beside this one, and
# a fixed port collided with one of theirs once).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run() {  # run WORLD [ENV...]: rank 0's stdout in $out/rank0; a new port if the one taken is busy
  local world=$1; shift
  local attempt
  for attempt in 1 2 3; do
    local port pids=() status=0
    port=$(free_port)
    for ((r = 0; r < world; r++)); do
      env "$@" RANK=$r WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COIL_TIMEOUT_MS=60000 \
        "$topo" --comm >"$out/rank$r" 2>"$out/err$r" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    [ $status = 0 ] && return 0
    grep -q "Address already in use" "$out/err0" || break
  done
  fail "a rank of coil-topo --comm exited non-zero"
}

run 3
grep -q "^rank 0 *X *shm *shm" "$out/rank0" || fail "rank 0's row is not X shm shm"
grep -q "^rank 2 *shm *shm *X" "$out/rank0" || fail "rank 2's row is not shm shm X"
grep -q "shm, the first choice: 0->1 0->2 1->0 1->2 2->0 2->1" "$out/rank0" || fail "no reason line for shm"
[ ! -s "$out/rank1" ] || fail "rank 1 printed something (only rank 0 reports)"

run 2 COIL_TRANSPORT=tcp
grep -q "^rank 0 *X *tcp" "$out/rank0" || fail "with COIL_TRANSPORT=tcp rank 0's row is not X tcp"
grep -q "tcp, forced by COIL_TRANSPORT: 0->1 1->0" "$out/rank0" || fail "no 'forced' reason"

if env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID \
    "$topo" --comm >"$out/alone" 2>&1; then
  fail "coil-topo --comm without a launcher exited 0"
fi
grep -q "run it under a launcher" "$out/alone" || fail "no hint about the launcher"
echo "coil-topo --comm: shm and forced tcp reported with their reasons; no launcher: a clear error"
