#!/bin/sh
# rxe_ib_test_bodies: the collective test bodies shm and tcp run in the
# threads and procs suites, over ib (COIL_TEST_TRANSPORTS=ib, rxe0):
#   collectives_test: every collective, every forced algorithm, 3 ranks as
#     threads, awkward counts, against the independent reference; 2 and 3
#     processes with the tuner's own choices (each rank its own device
#     context, registrations and remote keys). Every forced algorithm at 2
#     processes took another 70 s under TCG: with one peer each of them is
#     the same exchange with it, in other chunks, which the threads' 3-rank
#     runs cover; at 3 processes another 100 s. 5 and 8 ranks on shm and
#     tcp only;
#   faults_test: abort from another thread unblocks within 100 ms, a peer
#     that dies mid-collective, revoke, a peer that never calls, mismatches.
#   api_misuse_test: coilCommRegister'd buffers sent zero-copy, bad handles.
#   exit_without_destroy_test: a rank that exits right after a send (its
#     RDMA writes still in flight): the data arrives, since coil's exit
#     waits until the peer's NIC acknowledged them (the broadcast and
#     forked-child cases passed too, 2026-11-29, and took 40 s more).
#   random_program_test: two random programs on 3 ranks as threads (long
#     mixes of every collective, groups and messages, a split child).
# Usage: ib_test_bodies.sh COLLECTIVES_TEST FAULTS_TEST API_MISUSE_TEST EXIT_TEST RANDOM_TEST
set -u
usage="usage: ib_test_bodies.sh COLLECTIVES_TEST FAULTS_TEST API_MISUSE_TEST EXIT_TEST RANDOM_TEST"
collectives=${1:?$usage}
faults=${2:?$usage}
misuse=${3:?$usage}
exit_test=${4:?$usage}
random_test=${5:?$usage}
here=$(dirname "$0")
. "$here/lib.sh"
# Faults.TimeoutWhenAPeerNeverCalls: 3 s, not 500 ms (that deadline covers
# init too, and queue-pair setup under TCG emulation can take longer).
export COIL_TEST_TRANSPORTS=ib COIL_IB_HCA="=$RXE_ONE_HOST_DEV" COIL_SOCKET_IFNAME=lo \
  COIL_TEST_SHORT_TIMEOUT_MS=3000
fail=0
run() {  # name, command...
  name=$1; shift
  echo "== $name (t=$(uptime_s) s)"
  timeout 400 "$@" > /tmp/body.out 2>&1; rc=$?
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] .* ran" /tmp/body.out
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' /tmp/body.out)
  if [ $rc != 0 ] || [ -z "$ran" ] || [ "$ran" = 0 ]; then
    grep -B5 -A20 "FAILED\|Failure" /tmp/body.out | head -80
    echo "FAIL: $name (exit $rc, ${ran:-0} tests)"; fail=1
  fi
}
run "collectives over ib, processes" "$collectives" \
  --gtest_filter='Procs/*/ib_procs_2_model:Procs/*/ib_procs_3_model'
run "collectives over ib, threads" "$collectives" --gtest_filter='Threads/*/ib_threads_3_*'
run "faults over ib" "$faults"
run "registration over ib" "$misuse" --gtest_filter='Registration.*'
run "exit without destroy over ib" "$exit_test" --gtest_filter='*/ib_send'
export COIL_PROGRAMS=2
run "random programs over ib" "$random_test" --gtest_filter='Threads/*/ib_threads_3'
[ $fail = 0 ] && echo "rxe_ib_test_bodies: passed" || echo "rxe_ib_test_bodies: FAILED"
exit $fail
