#!/usr/bin/env bash
# `pip install .` from the source tree into a fresh venv that has torch
# (linked to the torch venv's packages, not a second copy of them), then,
# from another folder and with nothing on PYTHONPATH, a 2-rank all_reduce
# over the "coil" backend with no `import coil_torch` anywhere: the wheel
# carries libcoil.so and the adapter, the adapter finds the library, and
# `import torch` loads the adapter (its "torch.backends" entry point), as
# gloo needs no import. Then the same venv with an adapter that cannot load:
# `import torch` still works, warns why, and "coil" is not available.
# meson-python, meson and ninja come from PyPI (build isolation).
# Usage: pip_install_test.sh SOURCE_DIR TORCH_PYTHON
set -u
src=${1:?usage: pip_install_test.sh SOURCE_DIR TORCH_PYTHON}
torch_python=${2:?usage: pip_install_test.sh SOURCE_DIR TORCH_PYTHON}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
site=$("$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The interpreter the torch venv was made from (a venv of a venv has no
# working ssl module, so pip could not fetch meson-python).
base=$("$torch_python" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')
if ! "$base" -m venv "$work/venv"; then echo "FAIL: $base -m venv"; exit 1; fi
py="$work/venv/bin/python"
venv_site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" >"$venv_site/torch-venv.pth"
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "FAIL: the fresh venv does not import torch through $site"; exit 1
fi
# Without a GPU, the wheel is built without its CUDA parts: nvcc's kernels
# are most of the build's time, and the main build compiles them anyway
# (this test is about packaging). With a GPU it builds what users get.
pip_args=()
if [ -e /dev/nvidia0 ]; then
  echo "a GPU is present: the wheel includes the CUDA parts (-Dcuda=auto)"
else
  echo "no GPU here (/dev/nvidia0): the wheel is built with -Dcuda=disabled"
  pip_args+=(--config-settings=setup-args=-Dcuda=disabled)
fi
start=$SECONDS
# As a user's pip would: the adapter is built against the torch of the
# environment it goes into, not one a caller's COIL_TORCH_PYTHON names
# (tools/run-tests exports its main venv's: the oldest-torch leg's wheel was
# built for torch 2.15 and failed to load into torch 2.4.1).
if ! env -u PYTHONPATH -u COIL_TORCH_PYTHON -u COIL_TORCH_VENV "$py" -m pip install -q "${pip_args[@]}" \
    "$src" >"$work/pip.log" 2>&1; then
  echo "FAIL: pip install $src:"; tail -n 30 "$work/pip.log"; exit 1
fi
echo "pip install took $((SECONDS - start)) s"
cat >"$work/check.py" <<'PY'
import os, socket
import torch, torch.distributed as dist, torch.multiprocessing as mp
# torch 2.5 and later load the "torch.backends" entry points at import;
# with an older torch the program imports coil_torch itself (README).
AUTOLOADS = hasattr(torch, "_import_device_backends")
def rank_main(rank, world, port):
    if not AUTOLOADS:
        import coil_torch  # noqa: F401
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), COIL_SOCKET_IFNAME="lo")
    dist.init_process_group("coil", rank=rank, world_size=world)  # no import coil_torch
    t = torch.full((7,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [3.0] * 7, t.tolist()
    dist.destroy_process_group()
if __name__ == "__main__":
    import sys
    coil_torch = sys.modules.get("coil_torch")
    if not AUTOLOADS:
        print(f"torch {torch.__version__} loads no backend entry points: importing coil_torch")
        import coil_torch
    assert coil_torch is not None, "import torch did not load coil_torch (its entry point)"
    print("coil_torch from", coil_torch.__file__)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    mp.spawn(rank_main, args=(2, port), nprocs=2)
    print("all_reduce over the installed coil: ok")
PY
cd "$work" || exit 1
if out=$(env -u PYTHONPATH -u COIL_TORCH_EXT_DIR -u LD_LIBRARY_PATH "$py" check.py 2>&1) &&
   grep -q "coil_torch from $venv_site" <<<"$out" && grep -q "ok" <<<"$out"; then
  echo "$out"; echo "PASS: pip install . gives an importable coil_torch that works"
else
  echo "$out" | tail -n 20; echo "FAIL: the installed coil_torch"; exit 1
fi
# An adapter that cannot load (here a broken extension where COIL_TORCH_EXT_DIR
# points; in life, torch upgraded under an adapter built for the old one)
# must not break `import torch` for everyone in the venv. (A torch that loads
# no entry points never tries it.)
if ! "$py" -c 'import sys, torch; sys.exit(not hasattr(torch, "_import_device_backends"))'; then
  echo "torch in $venv_site loads no backend entry points: the broken-adapter check does not apply"
  exit 0
fi
mkdir -p "$work/broken"
suffix=$("$py" -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
echo "not a shared object" >"$work/broken/_coil_torch_ext$suffix"
cat >"$work/broken.py" <<'PY'
import torch, torch.distributed as dist
print("coil available:", dist.is_backend_available("coil"))
PY
if out=$(env -u PYTHONPATH -u LD_LIBRARY_PATH COIL_TORCH_EXT_DIR="$work/broken" "$py" broken.py 2>&1) &&
   grep -q "backend 'coil' is not available: coil_torch could not be loaded" <<<"$out" &&
   grep -q "_coil_torch_ext" <<<"$out" && grep -q "coil available: False" <<<"$out"; then
  echo "$out"; echo "PASS: a broken adapter leaves import torch working, says why, and coil unavailable"
else
  echo "$out" | tail -n 20; echo "FAIL: a broken adapter"; exit 1
fi
