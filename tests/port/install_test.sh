#!/usr/bin/env bash
# `meson install` into a fresh prefix (through DESTDIR), then the installed
# programs run from there with nothing on LD_LIBRARY_PATH: they find the
# libcoil.so installed with them (install rpath), not the build tree's.
# Usage: install_test.sh BUILD_DIR
set -u
build=${1:?usage: install_test.sh BUILD_DIR}
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
if ! meson install -C "$build" --no-rebuild --destdir "$dest" >"$dest.log" 2>&1; then
  echo "FAIL: meson install"; tail -n 20 "$dest.log"; rm -f "$dest.log"; exit 1
fi
rm -f "$dest.log"
status=0
found=0
for prog in coil_perf gloo_perf coil-sim; do
  path=$(find "$dest" -type f -name "$prog" | head -n 1)
  [ -n "$path" ] || continue
  env -u LD_LIBRARY_PATH ldd "$path" | grep -q 'libcoil\.so' || continue  # links it statically
  found=$((found + 1))
  resolved=$(env -u LD_LIBRARY_PATH ldd "$path" | awk '/libcoil\.so/ {print $3}')
  case "$resolved" in
    "$dest"/*) echo "PASS: installed $prog loads $resolved" ;;
    *) echo "FAIL: installed $prog loads libcoil from '${resolved:-nowhere}'"; status=1 ;;
  esac
done
if [ "$found" = 0 ]; then echo "FAIL: no installed program links libcoil.so under $dest"; status=1; fi
# And it runs: two local ranks, one all-reduce size, results checked.
perf=$(find "$dest" -type f -name coil_perf | head -n 1)
if [ -n "$perf" ]; then
  if env -u LD_LIBRARY_PATH COIL_SOCKET_IFNAME=lo "$perf" -P 2 -b 1K -e 1K -c 1 >/dev/null 2>&1; then
    echo "PASS: installed coil_perf runs"
  else
    echo "FAIL: installed coil_perf does not run:"; env -u LD_LIBRARY_PATH "$perf" -P 2 -b 1K -e 1K -c 1 2>&1 | tail -n 5
    status=1
  fi
fi
exit $status
