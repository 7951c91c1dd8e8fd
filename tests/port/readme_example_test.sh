#!/usr/bin/env bash
# Runs the README's C example (extracted and compiled by meson) as 3 ranks
# with a torchrun-style environment on 127.0.0.1 and checks what it prints.
set -u
bin=${1:?usage: readme_example_test.sh EXAMPLE_BINARY}
port=$((40000 + $$ % 20000))
out=$(mktemp)
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
rm -f "$out"
exit $status
