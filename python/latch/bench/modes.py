"""The five ways latch.bench runs a model step, each built once per (model, batch, size) as a
Step: run() computes one step and returns its output as a CPU torch tensor (synced), and
fell_back() says whether the mode left its own path (and so must not be timed as it):

  eager          PyTorch eager
  jit            torch.jit.trace: PyTorch's trace once (inference models only)
  torch_lazy     torch._lazy with its TorchScript backend: PyTorch's trace every
  latch_lazy     latch.torch.lazy: trace every, latch's compile cache; fell back when an op
                 ran eagerly (not lowered)
  latch_compile  latch.torch.compile: trace once, guards, latch's cached graph; fell back
                 when it runs the model eagerly or traces every call (past the recompile
                 limit, or a value read while tracing)

A training model's module is updated in place by each step, so every mode gets its own copy
of it, made before any step runs."""
import copy

import torch

import latch.torch as lt
from latch.torch import lazy as latch_lazy

MODES = ["eager", "jit", "torch_lazy", "latch_lazy", "latch_compile"]
LATCH_MODES = {"latch_lazy", "latch_compile"}
# Peers known not to run a model (torch._lazy aborts the process on vit_b_16: tensor.cpp:498
# "Input tensor is not a lazy tensor"); the bench runs torch._lazy in a child process anyway.
CRASHES = {("torch_lazy", "vit_b_16")}
_ts_ready = False


class Step:
    def __init__(self, run, fell_back=lambda: None):
        self.run, self.fell_back = run, fell_back


def _torch_lazy():
    global _ts_ready
    import torch._lazy
    import torch._lazy.ts_backend
    if not _ts_ready:
        torch._lazy.ts_backend.init()
        _ts_ready = True
    return torch._lazy


def _eager(module, args):
    return Step(lambda: module(*args))


def _jit(module, args):
    with torch.no_grad():
        traced = torch.jit.trace(module, args)
    return Step(lambda: traced(*args))


def _torch_lazy_step(module, args):
    tl = _torch_lazy()
    m = module.to("lazy")
    lazy_args = [a.to("lazy") for a in args]

    def run():
        out = m(*lazy_args)
        tl.mark_step()
        return out.cpu()
    return Step(run)


def _latch_lazy(module, args, training):
    m = latch_lazy.module(module)
    before = dict(latch_lazy.eager_ops)

    def run():
        out = m(*[latch_lazy.tensor(a) for a in args])
        latch_lazy.mark_step()
        if training:
            m.write_back()
        return out.cpu()

    def fell_back():
        ops = sorted(op for op, n in latch_lazy.eager_ops.items() if n > before.get(op, 0))
        return f"ran eagerly: {', '.join(ops)}" if ops else None
    return Step(run, fell_back)


def _latch_compile(module, args):
    c = lt.compile(module)

    def fell_back():
        if c.eager_reason:
            return f"runs eagerly: {c.eager_reason}"
        split = c._latch_compiled.eager_ops if hasattr(c, "_latch_compiled") else c.eager_ops
        if split:
            return f"ran eagerly between compiled parts: {', '.join(split)}"
        if c.stats().get("trace_every"):
            return "traces every call"
        return None
    return Step(lambda: c(*args), fell_back)


def build(mode, module, args, training, name=""):
    """The Step for mode, or None when the mode does not run this model."""
    if (mode, name) in CRASHES or (training and mode in ("jit", "torch_lazy")):
        return None
    if training or mode == "torch_lazy":  # updated in place / moved to the lazy device
        module = copy.deepcopy(module)
    if mode == "eager":
        return _eager(module, args)
    if mode == "jit":
        return _jit(module, args)
    if mode == "torch_lazy":
        return _torch_lazy_step(module, args)
    if mode == "latch_lazy":
        return _latch_lazy(module, args, training)
    if mode == "latch_compile":
        return _latch_compile(module, args)
    raise ValueError(f"latch.bench: unknown mode {mode!r}; modes: {', '.join(MODES)}")


def trace_only(mode, module, args):
    """For the lazy modes: a function that records one step without syncing, and one that
    drops what it recorded; for the per-op trace cost."""
    if mode == "torch_lazy":
        tl = _torch_lazy()
        m = copy.deepcopy(module).to("lazy")
        lazy_args = [a.to("lazy") for a in args]
        return (lambda: m(*lazy_args)), tl.mark_step
    m = latch_lazy.module(module)
    lazy_args = [latch_lazy.tensor(a) for a in args]
    return (lambda: m(*lazy_args)), latch_lazy.mark_step


def count_aten_ops(module, args):
    """aten ops one step dispatches (what each lazy mode traces)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            Count.ops += 1
            return func(*a, **(kw or {}))

    with Count():
        module(*args)
    return Count.ops
