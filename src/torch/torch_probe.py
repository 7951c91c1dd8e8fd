"""Prints what src/torch/meson.build needs to build against this Python's torch.

Run by Meson with each candidate interpreter; exits non-zero when torch (or
its distributed package) is missing, so Meson tries the next one. Output,
one value per line, in this order:
  torch version, _GLIBCXX_USE_CXX11_ABI (0/1), torch lib dir,
  then the existing include dirs (a dangling one, like Debian's TH, is left out).
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
