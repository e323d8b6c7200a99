"""The five ways latch.bench runs a model step, each built once per (model, batch, size) and
returning a step() whose result is computed (synced) when it returns:

  eager          PyTorch eager
  jit            torch.jit.trace: PyTorch's trace once (inference models only)
  torch_lazy     torch._lazy with its TorchScript backend: PyTorch's trace every
  latch_lazy     latch.torch.lazy: trace every, latch's compile cache
  latch_compile  latch.torch.compile: trace once, guards, latch's cached graph"""
import copy

import torch

import latch.torch as lt
from latch.torch import lazy as latch_lazy

MODES = ["eager", "jit", "torch_lazy", "latch_lazy", "latch_compile"]
# Peers known not to run a model (torch._lazy aborts the process on vit_b_16: tensor.cpp:498
# "Input tensor is not a lazy tensor"); the bench runs torch._lazy in a child process anyway.
CRASHES = {("torch_lazy", "vit_b_16")}
_ts_ready = False


def _torch_lazy():
    global _ts_ready
    import torch._lazy
    import torch._lazy.ts_backend
    if not _ts_ready:
        torch._lazy.ts_backend.init()
        _ts_ready = True
    return torch._lazy


def build(mode, module, args, training, name=""):
    """step() for mode, or None when the mode does not run this model."""
    if (mode, name) in CRASHES:
        return None
    if mode == "eager":
        return lambda: module(*args)
    if mode == "jit":
        if training:
            return None
        with torch.no_grad():
            traced = torch.jit.trace(module, args)
        return lambda: traced(*args)
    if mode == "torch_lazy":
        if training:
            return None
        tl = _torch_lazy()
        m = copy.deepcopy(module).to("lazy")
        lazy_args = [a.to("lazy") for a in args]

        def step():
            out = m(*lazy_args)
            tl.mark_step()
            return out.cpu()
        return step
    if mode == "latch_lazy":
        m = latch_lazy.module(copy.deepcopy(module) if training else module)

        def step():
            out = m(*[latch_lazy.tensor(a) for a in args])
            latch_lazy.mark_step()
            if training:
                m.write_back()
            return out.cpu()
        return step
    if mode == "latch_compile":
        c = lt.compile(copy.deepcopy(module) if training else module)
        return lambda: c(*args)
    raise ValueError(mode)


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
