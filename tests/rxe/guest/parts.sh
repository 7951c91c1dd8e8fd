#!/bin/sh
# The rxe suite's parts, one after another in one guest: each boot of the
# guest costs about 18 s under TCG (initramfs, firmware, kernel, the rxe
# devices, power-off), and when each of the seven parts booted its own, the
# boots were about a fifth of the suite's time (tests/rxe/meson.build).
#
# Usage: parts.sh [--only=NAME[,NAME...]] --part NAME SCRIPT [ARG...] [--part ...]
#   Each part is SCRIPT (in this folder) run with its ARGs under `timeout`
#   (RXE_PART_TIMEOUT seconds, default 480), its output streamed. A part
#   passes when its script exits 0. --only=, anywhere, runs just the parts
#   named (meson test -C build rxe --test-args=--only=rxe_ib_faults).
# Prints "RXE-PART NAME: PASS|FAIL (exit N)|TIMEOUT (after N s)" per part,
# then a summary, and exits 0 only when every part that ran passed; 1 when
# one failed or --only named a part that does not exist.
set -u
here=$(dirname "$0")
. "$here/lib.sh"
per_part=${RXE_PART_TIMEOUT:-480}

only=""
for a in "$@"; do
  case "$a" in --only=*) only=",${a#--only=}," ;; esac
done

# The parts' names and commands, one per line: NAME<TAB>SCRIPT ARG...
# (script arguments are build-tree paths: no blanks in them).
parts=$(
  name="" line=""
  for a in "$@"; do
    case "$a" in
      --only=*) ;;
      --part) [ -n "$name" ] && printf '%s\t%s\n' "$name" "$line"; name=""; line="" ;;
      *) if [ -z "$name" ] && [ -z "$line" ]; then name=$a; else line="${line:+$line }$a"; fi ;;
    esac
  done
  [ -n "$name" ] && printf '%s\t%s\n' "$name" "$line"
)
[ -n "$parts" ] || { echo "parts.sh: no --part given"; exit 1; }

if [ -n "$only" ]; then
  for want in $(echo "$only" | tr ',' ' '); do
    echo "$parts" | cut -f1 | grep -qx "$want" ||
      { echo "parts.sh: --only names '$want', not a part of this suite ($(echo "$parts" | cut -f1 | tr '\n' ' '))"; exit 1; }
  done
fi

summary=""
failed=0
tab=$(printf '\t')
while IFS="$tab" read -r name cmd; do
  case "$only" in ""|*",$name,"*) ;; *) continue ;; esac
  echo
  echo "======== $name (t=$(uptime_s) s): sh $cmd"
  start=$(uptime_s)
  # stdin from /dev/null, as guest-run gives the command: the loop's own
  # stdin is the list of parts, which a part must not read.
  # shellcheck disable=SC2086  # cmd is a script and its arguments
  timeout "$per_part" sh "$here"/$cmd </dev/null; rc=$?
  took=$(awk -v a="$start" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc = 0 ]; then
    result="PASS"
  elif awk -v t="$took" -v l="$per_part" 'BEGIN { exit !(t >= l - 1) }'; then
    result="TIMEOUT (after $per_part s)"; failed=1
  else
    result="FAIL (exit $rc)"; failed=1
  fi
  echo "RXE-PART $name: $result, $took s"
  summary="$summary
  $name: $result, $took s"
done <<EOF
$parts
EOF

echo
echo "======== rxe parts:$summary"
exit $failed
