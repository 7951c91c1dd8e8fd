#!/bin/sh
# rxe_ib_transport: the transport conformance body that shm and tcp run
# (tests/transport/transport_test.cc), over ib on one rxe device: every pair
# of 2, 3 and 5 ranks streams in order with flow control, a single-threaded
# driver, close wakes the peer, processes, a peer killed mid-stream.
# Usage: ib_transport.sh TRANSPORT_TEST
set -u
test_bin=${1:?usage: ib_transport.sh TRANSPORT_TEST}
echo "== transport_test over ib on $RXE_ONE_HOST_DEV"
COIL_IB_HCA="=$RXE_ONE_HOST_DEV" COIL_SOCKET_IFNAME=lo timeout 420 "$test_bin" \
  --gtest_filter='*/ib_*:*/ib' > /tmp/transport.out 2>&1
rc=$?
cat /tmp/transport.out
ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' /tmp/transport.out)
if [ $rc != 0 ] || [ -z "$ran" ] || [ "$ran" -lt 5 ]; then
  echo "rxe_ib_transport: FAILED (exit $rc, ${ran:-0} ib tests ran)"; exit 1
fi
echo "rxe_ib_transport: passed ($ran ib tests)"
