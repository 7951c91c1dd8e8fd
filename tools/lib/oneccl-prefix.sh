#!/usr/bin/env bash
# Installs the oneCCL baseline's parts (benchmarks/baselines/oneccl_perf)
# into a prefix outside any checkout, and prints where.
#
#   tools/lib/oneccl-prefix.sh          # idempotent: a second run is instant
#
# What it takes, from PyPI (Intel's own wheels, pinned):
#   oneccl-devel 2022.2.0        oneCCL's headers and its CPU-only static
#                                library (lib/ccl/cpu/lib/libccl.a). The
#                                shared libccl.so of the `oneccl` wheel is
#                                the SYCL build (it needs libsycl and a GPU
#                                runtime, 670 MB); the CPU archive needs
#                                neither.
#   intel-cmplr-lib-rt 2026.2.0  libirc.so: the Intel compiler's memcpy and
#                                memset (_intel_fast_memcpy), which the
#                                archive calls; 2026.2.0 is the compiler
#                                that built it ("IntelLLVM 2026.2.0").
# Only those files are kept: about 25 MB of the two wheels' 73 MB download.
# The other libraries oneCCL loads come from Debian: hwloc (linked) and
# libfabric (dlopen()ed at run time, its OFI transport), both already in
# tools/lib/install-deps.sh's list.
#
# Environment:
#   COIL_ONECCL_PREFIX  where it goes (default:
#                       ${XDG_CACHE_HOME:-~/.cache}/coil/oneccl; meson's
#                       oneCCL search looks there too)
#
# Exit status 0 with "oneccl-prefix: oneCCL 2022.2.0 in DIR"; non-zero with
# the reason on stderr when a wheel cannot be downloaded or lacks a file.
set -euo pipefail

prefix="${COIL_ONECCL_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/coil/oneccl}"
oneccl_version=2022.2.0
runtime_version=2026.2.0
stamp="$prefix/.installed-oneccl-$oneccl_version-cmplr-$runtime_version"

if [ -f "$stamp" ]; then
  echo "oneccl-prefix: oneCCL $oneccl_version in $prefix"
  exit 0
fi

# A Python with pip: the torch venv's, the one on PATH, or a small venv of
# Debian's python3 (python3-venv brings ensurepip).
pick_python() {
  local py
  for py in "${COIL_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/coil/torch-venv}/bin/python3" python3; do
    if "$py" -m pip --version >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  if [ ! -x "$prefix/.pip-venv/bin/python3" ]; then
    /usr/bin/python3 -m venv "$prefix/.pip-venv" >&2
  fi
  echo "$prefix/.pip-venv/bin/python3"
}

mkdir -p "$prefix"
python="$(pick_python)"
wheels="$prefix/.wheels"
mkdir -p "$wheels"
"$python" -m pip download --quiet --no-deps --only-binary :all: --dest "$wheels" \
  "oneccl-devel==$oneccl_version" "intel-cmplr-lib-rt==$runtime_version"

# Keep the files the baseline needs (and the licences), under the prefix's
# include/ and lib/ as the wheels lay them out in their .data/data/ trees.
"$python" - "$wheels" "$prefix" "$oneccl_version" "$runtime_version" <<'EOF'
import pathlib, sys, zipfile

wheels, prefix, oneccl, runtime = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
wanted = {
    f"oneccl_devel-{oneccl}": lambda p: p.startswith("include/") or p == "lib/ccl/cpu/lib/libccl.a",
    f"intel_cmplr_lib_rt-{runtime}": lambda p: p == "lib/libirc.so",
}
for stem, keep in wanted.items():
    [wheel] = wheels.glob(stem + "-*.whl")
    data = f"{stem}.data/data/"
    kept = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            licence = name.startswith(f"{stem}.dist-info/") and "LICENSE" in name.upper()
            if licence:
                target = prefix / "licences" / stem / pathlib.Path(name).name
            elif name.startswith(data) and not name.endswith("/") and keep(name[len(data):]):
                target = prefix / name[len(data):]
                kept += 1
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
    if kept == 0:
        sys.exit(f"oneccl-prefix: {wheel.name} holds none of the expected files")
EOF

for need in include/oneapi/ccl.hpp lib/ccl/cpu/lib/libccl.a lib/libirc.so; do
  if [ ! -f "$prefix/$need" ]; then
    echo "oneccl-prefix: $prefix/$need is missing after the install" >&2
    exit 1
  fi
done
rm -rf "$wheels"
touch "$stamp"
echo "oneccl-prefix: oneCCL $oneccl_version in $prefix"
