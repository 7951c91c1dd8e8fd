#!/usr/bin/env bash
# Starts ranks the way each launcher does and checks coilCommInitFromEnv:
#   torchrun-style (RANK/WORLD_SIZE/MASTER_*), Open MPI-style (OMPI_COMM_WORLD_*),
#   Slurm-style (SLURM_*), real mpirun when Open MPI is installed (also
#   without MASTER_ADDR/MASTER_PORT, as on one host they are not needed),
#   and real mpiexec.hydra when MPICH is installed.
# Then the secret of such a launch: the per-user secret file is made private
# on first use, an unsafe one is refused, a WARN line appears only without
# any secret, and hosts with different files fail naming it.
# All on 127.0.0.1. Usage: launch_env_test.sh LAUNCHER_RANK_BINARY
set -u
bin=${1:?usage: launch_env_test.sh LAUNCHER_RANK_BINARY}
n=3
status=0
# A home of our own: the ranks make $HOME/.coil/secret there, not in the
# real home, and the first launch below is the first use (ranks race to make it).
HOME=$(mktemp -d); export HOME
other_home=$(mktemp -d)
trap 'rm -rf "$HOME" "$other_home"' EXIT
unset COIL_SECRET COIL_SECRET_FILE
# A port the kernel just handed out, so the test never collides with one in use.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)

run_ranks() {  # name, then per-rank env assignments use $r
  local name=$1; shift
  local pids=() r
  for r in $(seq 0 $((n - 1))); do
    env "$@" COIL_SOCKET_IFNAME=lo COIL_TIMEOUT_MS=60000 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      $(eval echo "$RANK_VARS") "$bin" >/dev/null 2>"/tmp/coil-launch-$$-$r.err" &
    pids+=($!)
  done
  local ok=1
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  if grep -q "no secret for a rendezvous" /tmp/coil-launch-$$-*.err; then
    echo "FAIL: $name warned about a derivable key although the secret file is there"; ok=0
  fi
  if [ $ok = 1 ]; then echo "PASS: $name"; else
    echo "FAIL: $name"; status=1
    tail -n 3 /tmp/coil-launch-$$-*.err
  fi
  rm -f /tmp/coil-launch-$$-*.err
  port=$(free_port)
}

RANK_VARS='RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r' run_ranks "torchrun-style environment"
if [ "$(stat -c %a "$HOME/.coil/secret" 2>&1)" = 600 ] && [ "$(stat -c %a "$HOME/.coil")" = 700 ] &&
   [ "$(ls -A "$HOME/.coil")" = secret ]; then
  echo "PASS: the ranks made one private secret file"
else
  echo "FAIL: secret file: $(ls -la "$HOME/.coil" 2>&1)"; status=1
fi
RANK_VARS='OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n OMPI_COMM_WORLD_LOCAL_RANK=$r' \
  run_ranks "Open MPI-style environment"
RANK_VARS='SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_LOCALID=$r SLURM_STEP_ID=0' run_ranks "Slurm-style environment"

# A missing variable is a clear error, not a hang.
msg=$(env -u MASTER_PORT RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "$bin" 2>&1)
if echo "$msg" | grep -q "MASTER_PORT"; then echo "PASS: missing MASTER_PORT is named"; else
  echo "FAIL: missing MASTER_PORT not reported: $msg"; status=1; fi

# One rank alone, for the checks of the secret.
one_rank() { env COIL_SOCKET_IFNAME=lo RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" "$bin" 2>&1; }

msg=$(one_rank COIL_SECRET_FILE=none)
if echo "$msg" | grep -q "WARN.*not against attackers"; then echo "PASS: no secret: a warning says so"; else
  echo "FAIL: COIL_SECRET_FILE=none did not warn: $msg"; status=1; fi

cp -p "$HOME/.coil/secret" "$HOME/exposed"; chmod 644 "$HOME/exposed"
msg=$(one_rank COIL_SECRET_FILE="$HOME/exposed")
if echo "$msg" | grep -q "$HOME/exposed has permissions 0644"; then
  echo "PASS: a world-readable secret file is refused, naming it"
else
  echo "FAIL: a world-readable secret file was not refused: $msg"; status=1
fi

# Two "hosts" without a shared home: rank 1 makes a secret file of its own.
port=$(free_port)
env COIL_SOCKET_IFNAME=lo COIL_TIMEOUT_MS=3000 RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$port "$bin" >/dev/null 2>&1 &
rank0=$!
msg=$(env HOME="$other_home" COIL_SOCKET_IFNAME=lo COIL_TIMEOUT_MS=3000 RANK=1 WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" 2>&1)
wait $rank0
if echo "$msg" | grep -q "secret file $other_home/.coil/secret: ranks on hosts that do not share"; then
  echo "PASS: different secret files: the failure names the file"
else
  echo "FAIL: different secret files: $msg"; status=1
fi
port=$(free_port)

if command -v mpirun >/dev/null; then
  if mpirun -np $n --oversubscribe --allow-run-as-root --mca btl self,tcp \
      --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo \
      -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port -x COIL_SOCKET_IFNAME=lo "$bin" >/dev/null; then
    echo "PASS: real mpirun"
  else
    echo "FAIL: real mpirun"; status=1
  fi
  # The README's "mpirun -np 4 ./a.out": on one host no MASTER_ADDR or
  # MASTER_PORT is needed (loopback, and a port from Open MPI's job id).
  if msg=$(env -u MASTER_ADDR -u MASTER_PORT mpirun -np $n --oversubscribe --allow-run-as-root \
      --mca btl self,tcp --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo \
      -x COIL_SOCKET_IFNAME=lo "$bin" 2>&1); then
    echo "PASS: real mpirun on one host without MASTER_ADDR or MASTER_PORT"
  else
    echo "FAIL: real mpirun without MASTER_ADDR/MASTER_PORT: $(echo "$msg" | tail -n 3)"; status=1
  fi
else
  echo "(mpirun not installed: real mpirun launch not tried)"
fi

# MPICH's (and Intel MPI's) mpiexec, hydra: PMI_RANK/PMI_SIZE, MASTER_PORT
# given, MASTER_ADDR left out on one host.
if command -v mpiexec.hydra >/dev/null; then
  if msg=$(env -u MASTER_ADDR mpiexec.hydra -n $n -genv MASTER_PORT "$port" \
      -genv COIL_SOCKET_IFNAME lo "$bin" 2>&1); then
    echo "PASS: real mpiexec.hydra (MPICH)"
  else
    echo "FAIL: real mpiexec.hydra: $(echo "$msg" | tail -n 3)"; status=1
  fi
  port=$(free_port)
else
  echo "(mpiexec.hydra not installed (Debian: mpich): MPICH launch not tried)"
fi
exit $status
