"""What `import torch` runs, so that init_process_group("coil") works as "gloo" does.

gloo and nccl need no import. A third-party backend exists only once its
module has called Backend.register_backend, so a trainer moved from gloo to
coil would also need an `import coil_torch` line. torch (2.5 and later)
calls every "torch.backends" entry point at the end of `import torch`
(its out-of-tree backend autoloading, pytorch/pytorch#122468), and
`pip install .` records load() below as coil's (pyproject.toml).
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off for every package; then
`import coil_torch` works as before. (A source checkout used through
PYTHONPATH has no entry point: it imports coil_torch itself.)

This is a module of its own, outside the coil_torch package: importing
anything inside that package runs its __init__, which loads the native
extension, and torch re-raises whatever an entry point raises. That would
fail every `import torch` in the environment, coil user or not: after an
upgrade of torch that the adapter was not rebuilt for, say. So a failure
here is a warning that says why, and "coil" stays unregistered:
dist.is_backend_available("coil") is False, and code that falls back to
gloo when it is still does.
"""


def load():
    try:
        import coil_torch  # noqa: F401  registers the backend
    except Exception as e:  # noqa: BLE001  never fail `import torch`
        import warnings
        warnings.warn(
            "the torch.distributed backend 'coil' is not available: coil_torch could not be "
            f"loaded when torch was imported ({type(e).__name__}: {e}). `import coil_torch` "
            "shows the whole error; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns torch's autoloading "
            "off.", RuntimeWarning, stacklevel=2)
