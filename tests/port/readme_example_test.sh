#!/usr/bin/env bash
# Runs the README's C example (extracted and compiled by meson) as 3 ranks
# with a torchrun-style environment on 127.0.0.1 and checks what it prints;
# then, where Open MPI is installed, as its comment says: `mpirun -np 4
# ./a.out`, with no MASTER_ADDR or MASTER_PORT (one host needs neither).
set -u
bin=${1:?usage: readme_example_test.sh EXAMPLE_BINARY}
# A port the kernel just handed out, so the test never collides with one in use.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
pids=()
for r in 0 1 2; do
  RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port COIL_SOCKET_IFNAME=lo \
    COIL_TIMEOUT_MS=60000 "$bin" >>"$out" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$out"
# Every rank must print "rank R of 3: 3 (expected 3)".
[ "$(grep -c 'of 3: 3 (expected 3)' "$out")" = 3 ] || status=1

if command -v mpirun >/dev/null; then
  # --oversubscribe: 4 ranks on fewer cores; root in a container needs the
  # two ALLOW variables. Nothing else is added to what the README prints.
  env -u MASTER_ADDR -u MASTER_PORT OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    COIL_SOCKET_IFNAME=lo mpirun -np 4 --oversubscribe "$bin" >"$out" 2>&1 || status=1
  cat "$out"
  [ "$(grep -c 'of 4: 6 (expected 6)' "$out")" = 4 ] || { echo "FAIL: under mpirun -np 4"; status=1; }
else
  echo "(mpirun not installed: the example's mpirun line not tried)"
fi
exit $status
