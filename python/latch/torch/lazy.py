"""latch.torch.lazy: trace every step, the lazy-tensor model of PyTorch/XLA.

A LazyTensor is a torch tensor subclass holding a latch Tensor; every aten op on it reaches
__torch_dispatch__ and is recorded into latch's pending graph (the lowerings of
latch.torch.compile), not run. Reading a value (.item(), .numpy(), .tolist(), printing,
.to("cpu") / .cpu()) or mark_step() syncs: the pending graph is cut, hashed and looked up in
latch's compile cache, compiled on a miss, and run. An op latch does not lower syncs its
inputs and runs eagerly (said once per op on stderr); its results are lazy again.

  x = latch.torch.lazy.tensor(torch_tensor)     # lent to latch, no copy
  model = latch.torch.lazy.module(torch_module) # parameters lent; call with lazy inputs
  y = model(x); latch.torch.lazy.mark_step(); y.cpu()"""
import sys
from collections import Counter

import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree

from .. import _latch
from . import dtypes as D
from .lowering import LOWERINGS

aten = torch.ops.aten
_warned = set()
eager_ops = Counter()  # aten op name -> calls run eagerly (latch.bench marks a cell that has any)


class LazyTensor(torch.Tensor):
    """Made by tensor() and by ops on LazyTensors (the extension's lazy_wrap); holds .lt."""
    __slots__ = ["lt"]

    __torch_function__ = torch._C._disabled_torch_function_impl
    # lookup, unwrapping, lowering and wrapping in C (python/src/dispatch.c); what C does not
    # handle comes back to _slow
    __torch_dispatch__ = classmethod(_latch.lazy_dispatch)

    def __repr__(self):
        return f"LazyTensor({materialize(self)!r})"

    def numpy(self):
        return materialize(self).numpy()

    def tolist(self):
        return materialize(self).tolist()

    def cpu(self):
        return materialize(self)

    def to(self, *args, **kwargs):
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu":
            return materialize(self)
        return super().to(*args, **kwargs)


def _slow(func, args, kwargs):
    """What lazy_dispatch hands back: .item(), and ops latch does not lower (run eagerly)."""
    if func is aten._local_scalar_dense.default:
        return materialize(args[0]).item()
    return _eager(func, args, kwargs or {})


def _unwrap(x):
    if isinstance(x, LazyTensor):
        return x.lt
    if isinstance(x, torch.Tensor):
        return _latch.from_torch(x.detach().contiguous())
    if isinstance(x, torch.device):
        return x
    return x


def materialize(x):
    """A torch CPU tensor with x's value (synced); a view of latch's memory, no copy."""
    return D.to_torch(x.lt) if isinstance(x, LazyTensor) else x


def _eager(func, args, kwargs):
    name = str(func)
    eager_ops[name] += 1
    if name not in _warned:
        _warned.add(name)
        print(f"latch: lazy: aten op {name} is not lowered; it runs eagerly", file=sys.stderr)
    out = func(*pytree.tree_map(materialize, args), **pytree.tree_map(materialize, kwargs))
    return pytree.tree_map(lambda t: _latch.lazy_wrap(_latch.from_torch(t.contiguous())) if isinstance(t, torch.Tensor)
                           else t, out)


def tensor(t, requires_grad=None):
    """t lent to latch (no copy) as a LazyTensor."""
    rg = t.requires_grad if requires_grad is None else requires_grad
    return _latch.lazy_wrap(_latch.from_torch(t.detach().contiguous()), rg)


class _TrainingBatchNorm(torch.overrides.TorchFunctionMode):
    """Training-mode batch norm as ops latch lowers (its native op is lowered for inference
    only): the batch statistics, the normalization and the affine map, differentiated by
    autograd; the running statistics updated in place, which latch writes into the lent
    buffers."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.batch_norm:
            return func(*args, **kwargs)
        bound = dict(zip(("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
                         args), **kwargs)
        if not bound.get("training", False):
            return func(*args, **kwargs)
        x, weight, bias = bound["input"], bound.get("weight"), bound.get("bias")
        dims = [0] + list(range(2, x.dim()))
        shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
        mean = x.mean(dims, keepdim=True)
        var = x.var(dims, unbiased=False, keepdim=True)
        out = (x - mean) * torch.rsqrt(var + bound.get("eps", 1e-5))
        if weight is not None:
            out = out * weight.reshape(shape)
        if bias is not None:
            out = out + bias.reshape(shape)
        running_mean, running_var = bound.get("running_mean"), bound.get("running_var")
        if running_mean is not None and running_var is not None:
            momentum, n = bound.get("momentum", 0.1), x.numel() // x.shape[1]
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(-1) * momentum)
                running_var.mul_(1 - momentum).add_(var.reshape(-1) * (momentum * n / max(n - 1, 1)))
        return out


class LazyModule(torch.nn.Module):
    """An nn.Module around a module whose parameters and buffers are lent to latch; call it
    with LazyTensors. Its parameters() are the module's own, so an optimizer made on either
    steps the tensors the module holds. backward() through a lazy result puts each parameter's
    gradient on the module's parameter (.grad, accumulated as eager does): autograd reaches
    the lazy stand-ins, whose hooks collect the gradients, and one sync when backward ends
    computes them all."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        self.slots = [(d, k) for sub in module.modules() for d in (sub._parameters, sub._buffers)
                      for k, v in d.items() if v is not None]
        self.torch_state = [d[k] for d, k in self.slots]
        self.state = [self._lend(i) for i in range(len(self.slots))]
        self.versions = [t._version for t in self.torch_state]
        self.pending = []  # (parameter, lazy gradient) collected during a backward

    def _lend(self, i):
        t = self.torch_state[i]
        lazy = tensor(t)
        if lazy.requires_grad:
            lazy.register_hook(lambda g, t=t: self._collect(t, g))
        return lazy

    def _collect(self, param, grad):
        if not self.pending:
            torch.autograd.Variable._execution_engine.queue_callback(self._land_gradients)
        self.pending.append((param, grad))
        return grad

    def _land_gradients(self):
        pending, self.pending = self.pending, []
        _latch.sync()
        with torch.no_grad():
            for param, grad in pending:
                value = materialize(grad).clone()
                param.grad = value if param.grad is None else param.grad + value

    def _refresh(self):
        for i, t in enumerate(self.torch_state):  # updated in place from outside: new contents
            if t._version != self.versions[i]:
                self.versions[i] = t._version
                self.state[i].lt.touch()

    def write_back(self):
        """Parameters latch updated in place into memory of its own are copied to torch's."""
        for i, t in enumerate(self.torch_state):
            if self.state[i].lt.data_ptr() != t.data_ptr():
                with torch.no_grad():
                    t.copy_(materialize(self.state[i]))
                self.state[i] = self._lend(i)
                self.versions[i] = t._version

    def forward(self, *args):
        self._refresh()
        for (d, k), lazy in zip(self.slots, self.state):  # the module's own dicts: parameters() sees them
            d[k] = lazy
        try:
            with _TrainingBatchNorm():
                return self.module(*args)
        finally:
            for (d, k), t in zip(self.slots, self.torch_state):
                d[k] = t


def module(m):
    return LazyModule(m)


_latch.lazy_setup(LazyTensor, torch.Tensor, _slow, _unwrap, torch.device("cpu"))


def mark_step():
    """Runs everything pending on this thread as one graph (compiled once per graph key)."""
    _latch.sync()
