#!/usr/bin/env bash
# Runs the README's C example (extracted and compiled by meson) as 3 ranks
# with a torchrun-style environment on 127.0.0.1 and checks what it prints.
set -u
bin=${1:?usage: readme_example_test.sh EXAMPLE_BINARY}
# A port the kernel just handed out, so the test never collides with one in use.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
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
