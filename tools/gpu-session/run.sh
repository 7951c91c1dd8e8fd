#!/bin/bash
# One GPU check, run on the borrowed machine from the repository root:
#   bash .gpu/run.sh        ($OUT: the folder whose files come back)
# Keeps to 6 log files under $OUT (8 come back; the caller's tee makes a 7th),
# each step under its own timeout.
cd "$(dirname "$0")" || exit 1; G=$PWD; ROOT=$(dirname "$G"); OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
export COIL_SOCKET_IFNAME=lo PYTHONFAULTHANDLER=1
# libcoil needs hwloc, coil_perf Open MPI too: the bare image may have neither.
export LD_LIBRARY_PATH=$G/lib
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
t() { local s rc; s=$(date +%s); "$@"; rc=$?; echo "rc=$rc $(( $(date +%s) - s ))s"; }
# Runs "$@" for at most $1 seconds. The first run in this check that goes
# past it gets the stacks of every thread of it and of its first child
# processes (cuda-gdb: the image has no gdb) before it is killed.
watched() {
  local limit=$1 start; start=$(date +%s); shift
  "$@" & local pid=$!
  while kill -0 "$pid" 2> /dev/null; do
    if (( $(date +%s) - start >= limit )); then
      echo "== watched: $1 still running after ${limit}s"
      if [ ! -e /tmp/stacks-taken ]; then
        touch /tmp/stacks-taken
        for p in $pid $(pgrep -P "$pid" | head -2); do
          echo "== stacks of pid $p"
          timeout 25 cuda-gdb -p "$p" -batch -ex "thread apply all bt 14" 2>&1 | grep -E "^#|^Thread" | head -90
        done
      fi
      pkill -KILL -P "$pid"; kill -KILL "$pid" 2> /dev/null; break
    fi
    sleep 0.5
  done
  wait "$pid"
}
sum() { grep -E "^\[  (FAILED|PASSED) |^\[  FAILED  \]" "$1" | head -30; grep -m4 -B2 -A12 "Failure" "$1" | head -50; tail -2 "$1"; }
# The torch extension builds on the CPUs while the GPU tests run.
(cd "$ROOT" && MAX_JOBS=14 python3 "$G/build_torch_ext.py" "$ROOT" /tmp/ext > "$OUT/torch.log" 2>&1; echo "ext build rc=$?" >> "$OUT/torch.log") &
EXT=$!
echo "== gpu_collectives_test Threads*"
t watched 60 ./tests/gpu/gpu_collectives_test --gtest_filter='Threads*' > "$OUT/threads.log" 2>&1; sum "$OUT/threads.log"
echo "== gpu_collectives_test Threads* with COIL_STAGING_BYTES=0 (every call through the block in trips)"
COIL_STAGING_BYTES=0 t watched 40 ./tests/gpu/gpu_collectives_test --gtest_filter='Threads*' >> "$OUT/threads.log" 2>&1; sum "$OUT/threads.log"
# The all-reduce over the peers' mapped memory (CUDA IPC), for every call
# and in 64 KiB windows (several chunks): tests/gpu/meson.build's peer runs.
echo "== gpu_collectives_test Threads* and Procs* on peer windows"
COIL_PEER_MIN_BYTES=1 COIL_PEER_WINDOW_BYTES=65536 COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT t watched 60 ./tests/gpu/gpu_collectives_test --gtest_filter='Threads*' > "$OUT/peer.log" 2>&1; sum "$OUT/peer.log"
COIL_PEER_MIN_BYTES=1 COIL_PEER_WINDOW_BYTES=65536 COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT t watched 120 ./tests/gpu/gpu_collectives_test --gtest_filter='Procs*' >> "$OUT/peer.log" 2>&1; sum "$OUT/peer.log"
echo "== gpu_collectives_test Procs* on peer windows shared by legacy IPC handles (COIL_PEER_IPC=legacy)"
COIL_PEER_IPC=legacy COIL_PEER_MIN_BYTES=1 COIL_PEER_WINDOW_BYTES=65536 COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT t watched 120 ./tests/gpu/gpu_collectives_test --gtest_filter='Procs*' >> "$OUT/peer.log" 2>&1; sum "$OUT/peer.log"
echo "legacy IPC init lines: $(grep -c "legacy CUDA IPC handles, 2 slots" "$OUT/peer.log")"
echo "legacy IPC windows left allocated at destroy (want 0): $(grep -c "destroy leaves this rank's peer window" "$OUT/peer.log")"
echo "peer windows in use (init lines): $(grep -c "read the peers' device memory" "$OUT/peer.log"); staged instead: $(grep -c "staged through host memory" "$OUT/peer.log")"
echo "registered windows mapped: $(grep -c "read the peers' buffers in place" "$OUT/peer.log"); not mapped: $(grep -c "registered but not mapped" "$OUT/peer.log")"
grep -m2 "registered but not mapped" "$OUT/peer.log"
grep -m2 "staged through host memory" "$OUT/peer.log"
echo "== gpu_collectives_test Procs*"
t watched 120 ./tests/gpu/gpu_collectives_test --gtest_filter='Procs*' > "$OUT/procs.log" 2>&1; sum "$OUT/procs.log"
# Processes that share the GPU (2-4 ranks here, no MPS yet): init's warning, once per process.
echo "init's GPU-sharing warnings: $(grep -c "processes of this communicator use this rank's GPU" "$OUT/procs.log")"
grep -m1 "processes of this communicator use this rank's GPU" "$OUT/procs.log"
echo "== device_reduce_test, device_convert_test, device_reduce_bench"
t timeout 40 ./tests/gpu/device_reduce_test > "$OUT/kernels.log" 2>&1; grep -E "PASSED|FAILED" "$OUT/kernels.log" | head -5
t timeout 25 ./tests/gpu/device_convert_test >> "$OUT/kernels.log" 2>&1; grep -E "PASSED|FAILED" "$OUT/kernels.log" | tail -3
t timeout 20 ./benchmarks/micro/device_reduce_bench --mib 256 --iters 20 >> "$OUT/kernels.log" 2>&1; tail -18 "$OUT/kernels.log"
for n in 2 4; do
  echo "== coil_perf -P $n --memory device"
  t timeout 20 ./benchmarks/perf/coil_perf -P $n -b 16 -e 64M -f 4 --memory device -c 1 -n 10 -w 3 -T 20 >> "$OUT/perf.log" 2>&1
  grep -v "^# Rank\|^#  Rank" "$OUT/perf.log" | tail -16 | head -14
done
# Where the windows start to pay (COIL_PEER_MIN_BYTES, 256 KiB by default,
# is a guess until this runs): every size on the windows, against none.
echo "== coil_perf -P 2 and 4 --memory device, 16 KiB-64 MiB: windows off (COIL_PEER_WINDOW_BYTES=0), on for every size (COIL_PEER_MIN_BYTES=1), off, on"
for n in 2 4; do
  for mode in off on off on; do
    echo "-- P=$n windows $mode"
    ( if [ $mode = off ]; then export COIL_PEER_WINDOW_BYTES=0; else export COIL_PEER_MIN_BYTES=1; fi
      t timeout 25 ./benchmarks/perf/coil_perf -P $n -b 16K -e 64M -f 4 --memory device -c 1 -n 10 -w 3 -T 20 > /tmp/perf-peer.tmp 2>&1 )
    cat /tmp/perf-peer.tmp >> "$OUT/perf.log"; grep -E "^ +[0-9]+ " /tmp/perf-peer.tmp
  done
done
# The windows the application registers (coilCommWindowRegister, coil_perf
# -R 2): the peers' buffers read in place, against the peer windows' slots
# (docs/performance.md 4.14: 2.5 S moved a rank instead of 4.5 S at 2 ranks).
echo "== coil_perf -P 2 (twice) and 4 --memory device, 1-64 MiB: peer windows (-R 0), registered windows (-R 2)"
for n in 2 4; do
  regs="0 2 0 2"; [ $n = 4 ] && regs="0 2"
  for reg in $regs; do
    echo "-- P=$n -R $reg"
    COIL_DEBUG=INFO COIL_DEBUG_SUBSYS=INIT t timeout 25 ./benchmarks/perf/coil_perf -P $n -b 1M -e 64M -f 4 --memory device -R $reg -c 1 -n 10 -w 3 -T 20 > /tmp/perf-peer.tmp 2>&1
    cat /tmp/perf-peer.tmp >> "$OUT/perf.log"; grep -E "^ +[0-9]+ " /tmp/perf-peer.tmp
    grep -m1 -E "window #[0-9]+ .*(in place|not mapped)" /tmp/perf-peer.tmp
  done
done
# The other collectives: staged through host memory (no peer windows),
# through the peer windows' slots (the peer programs), and (all but the
# sends and receives) read in place from registered windows.
echo "== coil_perf -P 2 --memory device -C allgather,reducescatter,broadcast,reduce,alltoall,sendrecv, 1-64 MiB: staged (COIL_PEER_WINDOW_BYTES=0), peer windows (-R 0), registered (-R 2)"
for mode in staged peer registered; do
  echo "-- $mode"
  reg=0; [ $mode = registered ] && reg=2
  ( [ $mode = staged ] && export COIL_PEER_WINDOW_BYTES=0
    t timeout 70 ./benchmarks/perf/coil_perf -P 2 -C allgather,reducescatter,broadcast,reduce,alltoall,sendrecv -b 1M -e 64M -f 8 --memory device -R $reg -c 1 -n 10 -w 3 -T 40 > /tmp/perf-peer.tmp 2>&1 )
  cat /tmp/perf-peer.tmp >> "$OUT/perf.log"; grep -E "^ +[0-9]+ " /tmp/perf-peer.tmp
done
# What a usable GPU costs the host path: with a device, every call asks
# CUDA which memory its buffers are (cudaPointerGetAttributes, twice);
# CUDA_VISIBLE_DEVICES= hides the device, and kindOf answers "host" without
# CUDA. Same binary, alternating.
echo "== host buffers, 8 B-1 KiB, -P 2: GPU visible vs hidden (CUDA_VISIBLE_DEVICES=)"
for v in visible hidden; do
  echo "-- GPU $v"
  ( [ $v = hidden ] && export CUDA_VISIBLE_DEVICES=
    t timeout 20 ./benchmarks/perf/coil_perf -P 2 -b 8 -e 1K -f 4 --memory host -c 1 -n 5000 -w 500 -T 20 > /tmp/perf-host.tmp 2>&1 )
  cat /tmp/perf-host.tmp >> "$OUT/perf.log"; grep -E "^ +[0-9]+ " /tmp/perf-host.tmp
done
echo "== coil_perf -P 2 --memory host (same card, same run)"
t timeout 15 ./benchmarks/perf/coil_perf -P 2 -b 16 -e 64M -f 4 --memory host -c 1 -n 10 -w 3 -T 20 >> "$OUT/perf.log" 2>&1
tail -16 "$OUT/perf.log" | head -14
echo "== torch: the extension build, then tests/torch/test_cuda.py"
wait $EXT; grep -v "^W[0-9]" "$OUT/torch.log" | tail -5
# A hang is described before it is killed: each rank's threads (gdb, where
# the image has it), then its main thread's native and Python stacks
# (SIGSEGV into segv_trace.so and faulthandler).
( sleep 130; for pid in $(pgrep -f spawn_main); do
    command -v gdb > /dev/null && gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null | grep -E "^#|^Thread" | head -120
    kill -SEGV "$pid"; done ) >> "$OUT/torch.log" 2>&1 &
WATCH=$!
(cd "$ROOT/tests/torch" && PYTHONUNBUFFERED=1 COIL_TORCH_EXT_DIR=/tmp/ext PYTHONPATH="$ROOT/python" OMP_NUM_THREADS=1 \
  LD_PRELOAD="$G/segv_trace.so" t timeout 150 python3 test_cuda.py >> "$OUT/torch.log" 2>&1)
kill $WATCH 2>/dev/null
grep -v "^\s*$" "$OUT/torch.log" | grep -v "^W[0-9]" | tail -60
echo "== torch: tests/torch/test_pipelining.py on CUDA (GPipe, 1F1B; CUDA send/recv)"
(cd "$ROOT/tests/torch" && COIL_TORCH_TEST_DEVICE=cuda PYTHONUNBUFFERED=1 COIL_TORCH_EXT_DIR=/tmp/ext \
  PYTHONPATH="$ROOT/python" OMP_NUM_THREADS=1 t timeout 60 python3 test_pipelining.py > /tmp/pipelining.log 2>&1)
cat /tmp/pipelining.log >> "$OUT/torch.log"; grep -v "^W[0-9]\|^frame" /tmp/pipelining.log | tail -12
# Small device calls of ranks as processes on one GPU cost ~220 us more per
# extra process than ranks as threads, in stream and host order alike
# (2026-11-27): the GPU time-slices between the processes' contexts. MPS
# puts them in one context: if that is the cause, the step goes with it.
echo "== coil_perf -P 2 --memory device, small sizes, under MPS"
if command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d && sleep 1
  for n in 2 4; do
    t timeout 20 ./benchmarks/perf/coil_perf -P $n -b 64 -e 64K -f 4 --memory device -c 1 -n 20 -w 3 -T 20 >> "$OUT/perf.log" 2>&1
    grep -E "^ +[0-9]+ " "$OUT/perf.log" | tail -6
  done
  echo quit | nvidia-cuda-mps-control
else
  echo "no nvidia-cuda-mps-control on this machine"
fi
