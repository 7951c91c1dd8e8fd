#!/usr/bin/env bash
# Creates or updates the Python virtual environment that the PyTorch
# adapter (src/torch, python/coil_torch) is built and tested with, and
# prints the torch version it holds.
#
#   tools/lib/torch-venv.sh            # run it: creates the venv if needed
#   source tools/lib/torch-venv.sh     # or source it and call coil_torch_venv
#
# Idempotent and quick when done: if the venv's python already imports
# torch, numpy and expecttest, nothing is installed (about 2 s, the cost of
# importing torch once). Otherwise it creates the venv with the system
# Python 3 (/usr/bin/python3, Debian's 3.11; the python on PATH may be
# another build without matching headers) and installs them from PyPI.
# The Linux torch wheel pulls NVIDIA's CUDA libraries (a few GB); it runs
# on machines without a GPU.
#
# Environment:
#   COIL_TORCH_VENV    where the venv lives        (default:
#                      ${XDG_CACHE_HOME:-~/.cache}/coil/torch-venv, outside
#                      any checkout: one copy of torch's few GB for every
#                      clone, tools/run-tests and meson's own search alike)
#   COIL_VENV_BASE_PYTHON  the interpreter it is made from (default: /usr/bin/python3)
#   COIL_TORCH_VERSION this torch release (2.4.1), not PyPI's newest: the
#                      venv holds it or gets it (.ci/run's oldest-torch leg)
#
# Exit status: 0 with "torch-venv: torch X.Y.Z in DIR" on stdout; non-zero
# with the reason on stderr when the venv cannot be made or torch installed.

coil_torch_venv() {
  local venv base_python py
  venv="${COIL_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/coil/torch-venv}"
  mkdir -p "$(dirname "$venv")"
  base_python="${COIL_VENV_BASE_PYTHON:-/usr/bin/python3}"
  py="$venv/bin/python3"

  # The fast path: one import of what the adapter needs (of the release
  # asked for, if one is).
  local version pinned="${COIL_TORCH_VERSION:-}" want=torch
  if [ -n "$pinned" ]; then want="torch==$pinned"; fi
  if [ -x "$py" ] && version=$("$py" -c 'import expecttest, numpy, torch; print(torch.__version__)' 2>/dev/null) &&
     { [ -z "$pinned" ] || [ "${version%%+*}" = "$pinned" ]; }; then
    echo "torch-venv: torch $version in $venv"
    return 0
  fi

  if [ ! -x "$base_python" ]; then
    echo "torch-venv: no $base_python to create the venv with (set COIL_VENV_BASE_PYTHON)" >&2
    return 1
  fi
  # A directory without a working interpreter (an interrupted create, or a
  # system Python that was upgraded underneath it) is made anew.
  if [ -e "$venv" ] && ! "$py" -c 'import sys' >/dev/null 2>&1; then
    echo "torch-venv: $venv has no working python; recreating it"
    rm -rf -- "$venv"
  fi
  if [ ! -x "$py" ]; then
    echo "torch-venv: creating $venv with $("$base_python" --version 2>&1)"
    "$base_python" -m venv "$venv" || {
      echo "torch-venv: '$base_python -m venv' failed (Debian: apt-get install python3-venv)" >&2
      return 1
    }
  fi
  # expecttest: torch's own test helpers import it (the torch-suite, docs/torch-suite.md).
  echo "torch-venv: installing $want, numpy and expecttest from PyPI (a few GB the first time)"
  "$py" -m pip install --quiet --disable-pip-version-check "$want" numpy expecttest || {
    echo "torch-venv: pip install $want numpy expecttest failed" >&2
    return 1
  }
  if ! version=$("$py" -c 'import numpy, torch; print(torch.__version__)'); then
    echo "torch-venv: torch was installed but does not import" >&2
    return 1
  fi
  echo "torch-venv: torch $version in $venv"
}

# Run when executed, only define the function when sourced.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  coil_torch_venv
fi
