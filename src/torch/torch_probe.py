"""Prints what src/torch/meson.build needs to build against this Python's torch.

Run by Meson with each candidate interpreter; exits non-zero when torch (or
its distributed package) is missing, so Meson tries the next one. Output,
one value per line, in this order:
  torch version, _GLIBCXX_USE_CXX11_ABI (0/1), torch lib dir,
  then the existing include dirs (a dangling one, like Debian's TH, is left out),
  then, as -D flags, the pybind11 ABI names torch was built with.

The last matter to torch releases built with pybind11 2.x (torch 2.6 says
_gcc, _libstdcpp, _cxxabi1011): pybind11 shares its registry of bound types
only between modules whose ABI names agree, and it derives them from the
compiler that builds the module. Built with another GCC than torch's, the
extension would not find c10d.Backend, the base of its backend class
("referenced unknown base type"). Newer torch leaves them unset (None).
"""
import os
import sys

try:
    import torch
    import torch.distributed as dist
except Exception as e:  # any import failure means: not this interpreter
    print(f"torch does not import: {e}", file=sys.stderr)
    sys.exit(1)

if not dist.is_available():
    print("torch.distributed is not available in this build", file=sys.stderr)
    sys.exit(1)

root = os.path.dirname(torch.__file__)
includes = [os.path.join(root, "include"),
            os.path.join(root, "include", "torch", "csrc", "api", "include")]
print(torch.__version__)
print(int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)))
print(os.path.join(root, "lib"))
for d in includes:
    if os.path.isdir(d):
        print(d)
for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    value = getattr(torch._C, f"_PYBIND11_{name}", None)
    if value:
        print(f'-DPYBIND11_{name}="{value}"')
