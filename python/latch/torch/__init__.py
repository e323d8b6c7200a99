"""latch under PyTorch: compile (trace once, guard every call) and lazy (trace every step).
See latch/torch/compile.py and latch/torch/lazy.py."""
from . import dtypes  # installs the dtype table into the extension
from .compile import compile, Compiled, TRACE_ONCE, TRACE_EVERY, TRACE_EAGER
from . import lazy
from .lazy import mark_step

__all__ = ["compile", "Compiled", "lazy", "mark_step", "TRACE_ONCE", "TRACE_EVERY", "TRACE_EAGER"]
