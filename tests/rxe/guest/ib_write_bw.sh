#!/bin/sh
# Runs inside the rxe guest (tools/rxe/guest-run): perftest's ib_write_bw,
# the baseline for coil's verbs bandwidth in the same guest.
#
#   ib_write_bw.sh [--one-host] [--bidir] [-n ITERS] [-p PORT] BYTES...
#
# Default: two hosts. The server runs on host B (rxe2, netns hostb), the
# client on host A (rxe1, netns hosta) and RDMA-writes to it; the bytes
# cross the veth pair (checked: veth-b's rx bytes grow by at least what was
# written). --one-host: server and client both on rxe0 (dummy0).
# --bidir: both sides write at once (perftest -b); gbps is both directions
# together, and the mode is reported as <mode>-bidir.
# ITERS: messages per size (default: 64 MiB worth, 5 to 1000).
# Per size it prints one line, for scripts to grep:
#   RXE-IB_WRITE_BW mode=two-hosts bytes=<n> iters=<k> gbps=<average Gb/s> seconds=<wall>
# Exits non-zero when a run fails.
set -u
mode=two-hosts iters='' port=18515 bidir=0
while [ $# -gt 0 ]; do
  case "$1" in
    --one-host) mode=one-host ;;
    --bidir) bidir=1 ;;
    -n) iters=$2; shift ;;
    -p) port=$2; shift ;;
    -*) echo "ib_write_bw.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || set -- 65536
: "${RXE_HOST_A_DEV:?not in the rxe guest (tools/rxe/guest-run)}"

if [ $mode = two-hosts ]; then
  srv="in-host-b" cli="in-host-a"
  srv_dev=$RXE_HOST_B_DEV srv_gid=$RXE_HOST_B_GID
  cli_dev=$RXE_HOST_A_DEV cli_gid=$RXE_HOST_A_GID server_ip=$RXE_HOST_B_IP
  rx_counter=/sys/class/net/$RXE_HOST_B_NETDEV/statistics/rx_bytes
else
  srv="" cli=""
  srv_dev=$RXE_ONE_HOST_DEV srv_gid=$RXE_ONE_HOST_GID
  cli_dev=$RXE_ONE_HOST_DEV cli_gid=$RXE_ONE_HOST_GID server_ip=$RXE_ONE_HOST_IP
  rx_counter=
fi
# shellcheck source=tests/rxe/guest/lib.sh
. "$(dirname "$0")/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status=0
for bytes in "$@"; do
  n=$iters
  if [ -z "$n" ]; then
    n=$((67108864 / bytes)); [ $n -ge 5 ] || n=5; [ $n -le 1000 ] || n=1000
  fi
  common="-F --report_gbits -s $bytes -n $n -p $port"
  [ $bidir = 1 ] && common="$common -b"
  rx0=0; [ -n "$rx_counter" ] && rx0=$(cat "$rx_counter")
  t0=$(uptime_s)
  # shellcheck disable=SC2086  # word splitting of $srv, $common on purpose
  timeout 300 $srv ib_write_bw -d "$srv_dev" -x "$srv_gid" $common >"$tmp/server" 2>&1 &
  server=$!
  if ! wait_listening "$srv" "$port" $server; then
    cat "$tmp/server"; status=1; break
  fi
  # shellcheck disable=SC2086
  timeout 300 $cli ib_write_bw -d "$cli_dev" -x "$cli_gid" $common "$server_ip" >"$tmp/client" 2>&1
  cs=$?
  wait $server; ss=$?
  t1=$(uptime_s)
  gbps=$(awk -v b="$bytes" '$1 == b && NF >= 4 { print $4; exit }' "$tmp/client")
  if [ $cs != 0 ] || [ $ss != 0 ] || [ -z "$gbps" ]; then
    echo "ib_write_bw.sh: $mode bytes=$bytes failed (client exit $cs, server exit $ss)"
    echo "--- client:"; cat "$tmp/client"; echo "--- server:"; cat "$tmp/server"
    status=1; continue
  fi
  grep -E '^ *(#bytes|[0-9]+ )' "$tmp/client"
  extra=
  if [ -n "$rx_counter" ]; then
    rx=$(($(cat "$rx_counter") - rx0))
    extra=" veth_rx_bytes=$rx"
    if [ $rx -lt $((bytes * n)) ]; then
      echo "ib_write_bw.sh: only $rx bytes crossed $RXE_HOST_B_NETDEV for $((bytes * n)) written"
      status=1
    fi
  fi
  label=$mode; [ $bidir = 1 ] && label=$mode-bidir
  echo "RXE-IB_WRITE_BW mode=$label bytes=$bytes iters=$n gbps=$gbps" \
    "seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')$extra"
  port=$((port + 1))
done
exit $status
