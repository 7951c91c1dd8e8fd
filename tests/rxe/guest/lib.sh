# Sourced by the scripts in tests/rxe/guest/ (they run inside the rxe guest
# of tools/rxe/guest-run; /bin/sh is dash there).

# wait_listening RUNNER PORT [PID]: waits (up to 30 s) until a TCP socket
# listens on PORT in the network namespace RUNNER runs in (in-host-a,
# in-host-b, or "": this one). Fails at once when process PID has exited.
wait_listening() {
  _runner=$1; shift
  _hex=$(printf '%04X' "$1") _pid=${2:-} _i=0
  # shellcheck disable=SC2086  # $_runner is a command or nothing
  until $_runner cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p=":$_hex" '$2 ~ p"$" && $4 == "0A" { f = 1 } END { exit !f }'; do
    _i=$((_i + 1))
    [ $_i -le 1500 ] || { echo "wait_listening: nothing listens on port $1 after 30 s"; return 1; }
    if [ -n "$_pid" ] && ! kill -0 "$_pid" 2>/dev/null; then
      echo "wait_listening: process $_pid exited before listening on port $1"; return 1
    fi
    sleep 0.02
  done
}

# uptime_s: seconds since the guest booted (for timings).
uptime_s() { cut -d' ' -f1 /proc/uptime; }
