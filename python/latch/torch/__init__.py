"""latch under PyTorch: compile (trace once, guard every call; torch.compile's signature),
backend (torch.compile(backend="latch")), lazy (trace every step), explain and stats.
See latch/torch/api.py, compile.py, backend.py, lazy.py and explain.py."""
try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("latch.torch needs PyTorch 1.13 or later: install python3-torch (Debian: apt install "
                      "python3-torch) or torch from pip") from e

from . import check
from . import dtypes  # installs the dtype table into the extension
from .compile import Compiled, TRACE_ONCE, TRACE_EVERY, TRACE_EAGER
from .api import compile, OptimizedModule
from .backend import backend
from .explain import explain, stats
from . import lazy
from .lazy import mark_step

__all__ = ["compile", "backend", "explain", "stats", "Compiled", "OptimizedModule", "lazy", "mark_step",
           "TRACE_ONCE", "TRACE_EVERY", "TRACE_EAGER"]
