"""coil as a torch.distributed backend.

    import coil_torch                      # registers the backend "coil"
    torch.distributed.init_process_group("coil")

Installed with pip, `import torch` imports this package itself (the entry
point in coil_torch_autoload.py), so the first line may be left out.

Works with every launcher torch's env:// rendezvous supports (torchrun,
torch.multiprocessing.spawn with MASTER_ADDR/MASTER_PORT, mpirun with
RANK/WORLD_SIZE set), and with an explicit store= or init_method=.

CPU and CUDA tensors (COIL_TORCH_CUDA=0 refuses CUDA ones). A CUDA
collective follows ProcessGroupNCCL's stream pattern (it runs on a side
stream that waits for the current one, returns at once, and work.wait()
makes the current stream, not the host, wait for it) and coil moves the
bytes through its device path (between ranks of one host, the peers'
device memory through CUDA IPC; elsewhere pinned staging). tests/torch/test_cuda.py
has passed on one H100 with 1, 2 and 4 ranks; DDP and FSDP at scale on GPUs
have not run. Point-to-point (send/recv, batch_isend_irecv) on CUDA tensors
goes through pinned host memory in the streams' order (new, not yet run on a
GPU). Sparse all-reduce takes CPU tensors only.

The native part is the extension module ``_coil_torch_ext`` built by Meson
(src/torch). It is looked for, in order, in:
  1. $COIL_TORCH_EXT_DIR,
  2. this package's folder (where `meson install` puts it),
  3. <repo>/build/src/torch when this package is used from a source checkout.
"""
import collections
import glob
import importlib.machinery
import importlib.util
import ipaddress
import os
import threading

import torch  # noqa: F401 - loads libtorch before the extension that links it
import torch.distributed as dist

__all__ = ["BACKEND_NAME", "coil_version", "extension_path", "monitored_barrier"]

BACKEND_NAME = "coil"
_EXT_NAME = "_coil_torch_ext"


def _candidate_dirs():
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    if os.environ.get("COIL_TORCH_EXT_DIR"):
        dirs.append(os.environ["COIL_TORCH_EXT_DIR"])
    dirs.append(here)
    dirs.append(os.path.join(os.path.dirname(os.path.dirname(here)), "build", "src", "torch"))
    return dirs


def _load_extension():
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    tried = []
    for d in _candidate_dirs():
        for suffix in suffixes:
            for path in sorted(glob.glob(os.path.join(glob.escape(d), _EXT_NAME + suffix))):
                spec = importlib.util.spec_from_file_location(_EXT_NAME, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module, path
        tried.append(d)
    raise ImportError(
        f"coil_torch: the native module {_EXT_NAME} was not found in: {', '.join(tried)}. "
        "Build it (meson setup build && ninja -C build) with a Python that has torch "
        "(tools/lib/torch-venv.sh), or point COIL_TORCH_EXT_DIR at the folder holding it "
        "(<build>/src/torch).")


_ext, _ext_path = _load_extension()


def extension_path():
    """Where the native module was loaded from."""
    return _ext_path


def coil_version():
    """coil's version code (major*10000 + minor*100 + patch)."""
    return _ext.coil_version()


# Each backend created for a group gets its own store key for the unique id:
# the store torch passes is already private to the group, and the count
# tells apart successive backends of one group name (init, destroy, init again
# on the same store). Every member creates the same backends in the same
# order, so the counts agree across ranks.
_created = collections.Counter()
_created_lock = threading.Lock()


def _use_loopback_if_local():
    # With a loopback MASTER_ADDR every rank is on this host: let coil's
    # rendezvous root listen on loopback too, unless the user chose.
    if os.environ.get("COIL_SOCKET_IFNAME"):
        return
    addr = os.environ.get("MASTER_ADDR", "")
    try:
        local = addr == "localhost" or ipaddress.ip_address(addr).is_loopback
    except ValueError:
        local = False
    if local:
        os.environ["COIL_SOCKET_IFNAME"] = "lo"


def _timeout_ms(timeout):
    if timeout is None:
        return 0  # coil's default (COIL_TIMEOUT_MS or 30 min)
    return max(1, int(timeout.total_seconds() * 1000))


def _create_backend(dist_opts, backend_options):
    del backend_options  # coil has no options beyond the timeout
    group = dist_opts.group_id or "default"
    with _created_lock:
        _created[group] += 1
        generation = _created[group]
    _use_loopback_if_local()
    return _ext.CoilBackend(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        _timeout_ms(dist_opts.timeout),
        f"coil_unique_id/{generation}",
        group,
        # The default group is made before torch counts as initialized.
        not dist.is_initialized(),
    )


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for coil groups, on every torch 2.x.

    Rank 0 waits up to `timeout` (a timedelta or seconds; default: the
    group's timeout) for every other rank and raises naming the first that
    did not arrive ("Rank 2 failed to pass monitoredBarrier in 1000 ms"), or
    all of them with wait_all_ranks=True; the other ranks raise if rank 0
    does not release them in time. torch versions whose
    dist.monitored_barrier accepts only gloo groups refuse coil's; this
    calls the group's own monitored_barrier, which coil implements. Any other
    group (gloo's) goes to torch's function.
    """
    import datetime

    if group is None:
        group = dist.group.WORLD
    if dist.get_backend(group) != BACKEND_NAME:
        return dist.monitored_barrier(group, timeout, wait_all_ranks)
    if timeout is None:
        timeout = dist.distributed_c10d._get_default_timeout(BACKEND_NAME)
        try:
            timeout = group._get_backend(torch.device("cpu")).options._timeout
        except (AttributeError, RuntimeError):
            pass
    elif not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return group.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                              devices=["cpu", "cuda"])
