#!/usr/bin/env bash
# coil_perf and the MPI it was built with: each MPI library joins only a
# launch of its own process manager (Open MPI's mpirun, MPICH's mpiexec,
# hydra). The MPICH-built coil_perf runs its MPI baseline under mpiexec;
# each coil_perf under the other's launcher starts through
# coilCommInitFromEnv instead, and refuses --baseline mpi, saying which
# launcher it needs.  Usage: mpich_test.sh COIL_PERF COIL_PERF_MPICH
set -uo pipefail
perf_ompi="${1:?usage: mpich_test.sh COIL_PERF COIL_PERF_MPICH}"
perf_mpich="${2:?usage: mpich_test.sh COIL_PERF COIL_PERF_MPICH}"
for tool in mpiexec.hydra mpirun; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: needs $tool (Debian: mpich, openmpi-bin)"; exit 77
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 COIL_SOCKET_IFNAME=lo
unset MASTER_ADDR MASTER_PORT COIL_COMM_ID
fail=0
out="$(mktemp -d /tmp/coil-perf-mpich-XXXXXX)"
trap 'rm -rf "$out"' EXIT
check() {  # description, then a command that must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
sweep=(-b 8 -e 256K -f 8 -n 3 -w 1 -c 1)
# A port the kernel just handed out, for launches that need one.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# In the sanitizer leg, LeakSanitizer reports what MPICH's MPI_Init
# allocates and never frees (600 KiB in 8000 strdup calls, in MPICH's own
# frames): not coil's. The two runs that call MPI_Init leave leak checking
# out; the runs below that do not call it keep it.
mpich_init_env=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")

# 1. The MPICH build under mpiexec: MPI_Init, the id by MPI_Bcast, and the
#    MPI baseline's columns, from MPICH.
"${mpich_init_env[@]}" timeout 120 mpiexec.hydra -n 3 "$perf_mpich" --baseline mpi "${sweep[@]}" > "$out/mpich" 2>&1
check "MPICH build, mpiexec -n 3 --baseline mpi: exits 0" test $? -eq 0
check "... launcher mpiexec-hydra, 3 ranks" grep -q "nranks 3, transport auto, launcher mpiexec-hydra" "$out/mpich"
check "... the baseline is MPICH" grep -q "^# baseline mpi: MPICH Version: [0-9]" "$out/mpich"
check "... mpi columns" grep -q "mpi (out-of-place)" "$out/mpich"
check "... results checked" grep -q "Out of bounds values : 0 OK" "$out/mpich"

# 2. -t 2 under mpiexec: threads of MPI-started processes (the id comes
#    from MPI, so several ranks a process work, as under mpirun).
"${mpich_init_env[@]}" timeout 120 mpiexec.hydra -n 2 "$perf_mpich" -t 2 "${sweep[@]}" > "$out/mpich-t2" 2>&1
check "MPICH build, mpiexec -n 2 -t 2: 4 ranks" grep -q "nranks 4," "$out/mpich-t2"

# 3. The Open MPI build under mpiexec: coilCommInitFromEnv (PMI_RANK,
#    PMI_SIZE, MASTER_PORT); --baseline mpi is refused, naming mpirun.
timeout 120 mpiexec.hydra -n 3 -genv MASTER_PORT "$(free_port)" "$perf_ompi" "${sweep[@]}" > "$out/ompi-hydra" 2>&1
check "Open MPI build under mpiexec: exits 0" test $? -eq 0
check "... launcher mpiexec-hydra, results checked" grep -q "launcher mpiexec-hydra" "$out/ompi-hydra"
timeout 60 mpiexec.hydra -n 2 "$perf_ompi" --baseline mpi "${sweep[@]}" > "$out/ompi-hydra-mpi" 2>&1
check "Open MPI build, mpiexec --baseline mpi: refused (status 2)" test $? -eq 2
check "... naming Open MPI's mpirun" grep -q "built with Open MPI; start it with Open MPI's mpirun" "$out/ompi-hydra-mpi"

# 4. The MPICH build under Open MPI's mpirun: coilCommInitFromEnv, on one
#    host with no MASTER_ADDR or MASTER_PORT; --baseline mpi is refused.
timeout 120 mpirun -np 3 --oversubscribe "$perf_mpich" "${sweep[@]}" > "$out/mpich-mpirun" 2>&1
check "MPICH build under mpirun: exits 0" test $? -eq 0
check "... launcher mpirun, results checked" grep -q "Out of bounds values : 0 OK" "$out/mpich-mpirun"
timeout 60 mpirun -np 2 --oversubscribe "$perf_mpich" --baseline mpi "${sweep[@]}" > "$out/mpich-mpirun-mpi" 2>&1
check "MPICH build, mpirun --baseline mpi: refused (status 2)" test $? -eq 2
check "... naming mpiexec" grep -q "built with MPICH; start it with MPICH's or Intel MPI's mpiexec" "$out/mpich-mpirun-mpi"

if [ "$fail" -ne 0 ]; then
  for f in "$out"/*; do echo "== $f"; tail -n 5 "$f"; done
fi
exit "$fail"
