# shellcheck shell=bash
# Sourced by tools/quickstart and tools/run-tests (bash, set -euo pipefail).
#
# coil_install_deps [EXTRA...]: installs the Debian packages coil builds and
# tests with, and the EXTRA ones a caller needs besides (tools/quickstart:
# python3-matplotlib for tools/compare --plot), but only the missing ones,
# so a machine that has them all never
# touches apt. Uses sudo only when not root. Waits up to 10 minutes for the
# dpkg lock (other apt runs, unattended-upgrades) instead of failing.
#
# coil_phase NAME / coil_phase_end: print a banner and the elapsed seconds
# of each phase, so slow CI steps are easy to spot.

COIL_DEB_PACKAGES=(
  meson ninja-build g++ pkg-config
  # meson compiles through ccache when it is on PATH. tools/run-tests
  # compiles the library and the torch adapter twice, in build/ and in
  # pip_install's wheel, with the same flags: the wheel's compiles come from
  # the cache (108 of its 111; the test took 101 s instead of 250).
  ccache
  libgtest-dev libbenchmark-dev
  libhwloc-dev libibverbs-dev
  libopenmpi-dev openmpi-bin
  libgloo-dev
  iproute2
  python3-dev python3-venv
  clang libclang-rt-dev   # tools/run-fuzz: clang and its libFuzzer runtime
  # tests/rxe (tools/rxe/guest-run): Debian's kernel with Soft-RoCE under qemu
  qemu-system-x86 busybox-static cpio
  rdma-core ibverbs-utils ibverbs-providers perftest
)

coil_install_deps() {
  local missing=() pkg
  for pkg in "${COIL_DEB_PACKAGES[@]}" "$@"; do
    # dpkg -s succeeds for removed-but-configured packages too; require
    # the "install ok installed" state.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "deps: all $((${#COIL_DEB_PACKAGES[@]} + $#)) Debian packages present"
    return 0
  fi
  echo "deps: installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "deps: not root and no sudo; install these first: ${missing[*]}" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  local apt_opts=(-o DPkg::Lock::Timeout=600)
  "${sudo[@]}" apt-get "${apt_opts[@]}" update
  # env after sudo: sudo would drop a DEBIAN_FRONTEND set before it.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y \
    --no-install-recommends "${missing[@]}"
}

COIL_PHASE_NAME=""
COIL_PHASE_START=0
COIL_RUN_START=${COIL_RUN_START:-$SECONDS}

coil_phase() {
  COIL_PHASE_NAME="$1"
  COIL_PHASE_START=$SECONDS
  echo
  echo "==== $COIL_PHASE_NAME"
}

coil_phase_end() {
  echo "==== $COIL_PHASE_NAME: done in $((SECONDS - COIL_PHASE_START)) s (total $((SECONDS - COIL_RUN_START)) s)"
}

# coil_configure DIR: meson setup DIR (release), or reconfigure it if it
# already exists, so a checkout that moved on still builds.
# The one torch venv every tool uses (tools/lib/torch-venv.sh makes it; a
# clean clone reuses it). Configuring with it, when it exists, is what keeps
# a reconfigure (tools/quickstart after tools/run-tests) from dropping the
# torch adapter of an existing build.
coil_configure() {
  local dir="$1"
  export COIL_TORCH_VENV="${COIL_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/coil/torch-venv}"
  if [ -z "${COIL_TORCH_PYTHON:-}" ] && [ -x "$COIL_TORCH_VENV/bin/python3" ]; then
    export COIL_TORCH_PYTHON="$COIL_TORCH_VENV/bin/python3"
  fi
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" --buildtype=release
  else
    meson setup "$dir" --buildtype=release
  fi
}

# coil_configure_sanitizer DIR: meson setup of the sanitizer leg's build
# directory (tools/run-tests --sanitize). No CUDA, torch, benchmarks or the
# oneCCL baseline (a prebuilt archive, not built with the sanitizers): none
# of them runs in that leg's suites (no GPU here), and nvcc's kernels alone
# took 2+ minutes to build. clang: it built this leg's sources in 23% less
# time than g++ (four of the largest, same flags, 51 s against 66 s). -O1
# -g1 (line tables only), as ASan's docs suggest: stack traces keep their
# file:line, and the build takes half the time of -O2 -g (measured on
# collectives_test.cc and communicator.cc: 14 s against 26 s, 15 s against
# 35 s).
coil_configure_sanitizer() {
  local dir="$1" setup=()
  if [ -f "$dir/build.ninja" ]; then
    setup=(--reconfigure)
    # A directory configured before the leg moved to clang keeps its
    # compiler on --reconfigure: start it again.
    if ! grep -A1 '^rule cpp_COMPILER$' "$dir/build.ninja" | grep -q ' = clang++ '; then
      setup=(--wipe)
    fi
  fi
  CC=clang CXX=clang++ meson setup "${setup[@]}" "$dir" --buildtype=plain \
    -Doptimization=1 -Ddebug=false \
    -Db_sanitize=address,undefined -Db_lundef=false -Dtorch=disabled -Dbenchmarks=disabled \
    -Dcuda=disabled -Doneccl=disabled \
    "-Dcpp_args=-fno-sanitize-recover=undefined -g1" "-Dc_args=-fno-sanitize-recover=undefined -g1"
}

# The oldest torch release the adapter is tested with, and the venv that
# holds it (beside the main one): tools/run-tests --oldest-torch.
COIL_OLDEST_TORCH="${COIL_OLDEST_TORCH:-2.4.1}"
coil_oldest_torch_venv() {
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/coil/torch-venv-$COIL_OLDEST_TORCH"
}

# coil_build_oldest_torch DIR: configure (once) and build the oldest-torch
# leg's build directory, the adapter built against coil_oldest_torch_venv's
# torch. Only what its torch tests use: no CUDA, benchmarks, oneCCL or fuzz.
# COIL_TORCH_PYTHON is set for ninja too: Meson reads it again whenever it
# reconfigures by itself (after a meson.build changed).
coil_build_oldest_torch() {
  local dir="$1"
  export COIL_TORCH_PYTHON
  COIL_TORCH_PYTHON="$(coil_oldest_torch_venv)/bin/python3"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=release -Dtorch=enabled -Dcuda=disabled -Dbenchmarks=disabled \
      -Doneccl=disabled -Dfuzz=disabled || return 1
  fi
  ninja -C "$dir" -j "$(coil_jobs)"
}

# coil_jobs: parallel build jobs: the CPU count, at most COIL_JOBS if set.
coil_jobs() {
  local n
  n=$(nproc 2>/dev/null || echo 2)
  if [ -n "${COIL_JOBS:-}" ]; then n=$COIL_JOBS; fi
  echo "$n"
}
