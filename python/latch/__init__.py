"""latch for Python: the C library's lazy tensors, traced functions and compile cache
(include/latch.h) as the extension latch._latch, and a PyTorch frontend in latch.torch
(docs/python.md):

  latch.torch.compile(model)          torch.compile's signature: trace once, guard every call
  latch.torch.backend                 torch.compile(backend="latch") (an entry point)
  latch.torch.lazy                    trace every step (a __torch_dispatch__ tensor subclass)
  python3 -m latch.bench              the trace-once vs trace-every benchmark against PyTorch

The runtime is opened on first use from the LATCH_* variables (LATCH_BACKEND, LATCH_CHECK,
LATCH_LOG, LATCH_RECOMPILE_LIMIT, ...), as latch_open(NULL) does in C; latch.config sets them
from Python (latch/config.py)."""
import os

# latch's cpu backend runs oneDNN on libgomp, as PyTorch does: two OpenMP teams in one
# process that spin while waiting steal each other's cores (resnet18 at 32x32 took 300 ms a
# step instead of 21 on 2 cores). Waiting threads sleep unless the caller chose otherwise;
# libgomp reads this when it loads, so import latch before torch, or set it in the shell.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import _latch  # noqa: E402
from ._latch import Error, Unsupported, sync, stats, last_repro  # noqa: E402
from .config import config, configure  # noqa: E402

__all__ = ["Error", "Unsupported", "sync", "stats", "last_repro", "config", "configure"]
