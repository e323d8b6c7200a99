"""A whole training step as one latch graph: latch.torch.compile(step), where step runs the
forward, the loss, loss.backward() and the step() and zero_grad() of torch.optim optimizers.

A plain function whose code reads optimizers (closure cells, globals its code names, a bound
method's own attributes) takes this path. Everything such a step updates becomes an input of
its graph, lent by the Function like a module's parameters: each optimizer's parameters,
their .grad tensors when they persist between steps (zero_grad() without set_to_none), the
optimizer's state tensors (momentum buffers, Adam's moments and step counts) and the
buffers of the modules the step reads (batch norm's running statistics).

make_fx traces the call on those very tensors: the module and the optimizer reach them
through their own references, so torch's backward (its AccumulateGrad into .grad included)
and the optimizer's own step() code are recorded as aten ops. Adam and AdamW are traced with
their param groups' `differentiable` flag set, which takes torch.optim's tensor formulas for
the bias corrections (the default path reads the step count with .item(), which a trace
would bake in as a constant). The trace runs the step for real, so every value it changes
is put back after it, and .grad attributes too. The aten graph is then replayed under
functionalization: each update is a write-back latch applies to the tensor it was lent.

The first call runs eagerly when an optimizer has no state yet (torch.optim creates it in
its first step() with values a later step would not start from), and so does any call whose
trace would create or replace state (a new .grad, a new state entry): the next call traces
again. A trace that reads a tensor's value (.item(), a data-dependent branch) is refused: a
graph cannot keep a value read at the trace. What each graph depends on (the optimizers'
hyperparameters by value, which tensor sits in each slot, each .grad present or not) is
guarded like a module's state."""
import importlib

import functorch
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import autograd, guards
from .capture import Graph, TraceFailed, decompositions

aten = torch.ops.aten
_ADAMW = importlib.import_module("torch.optim.adamw")  # AdamW.step calls this module's adamw()


class NotReady(Exception):
    """The optimizers' state is created or replaced by this call: run it eagerly."""


class _NoValues(TorchDispatchMode):
    """Refuses reading a tensor's value inside the trace (it would become a constant)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten._local_scalar_dense.default:
            raise TraceFailed("the step reads a tensor's value (.item() or a branch on a tensor); a graph "
                              "cannot keep it")
        return func(*args, **(kwargs or {}))


def _read_values(fn):
    """The objects fn's code can reach by name: closure cells, globals its code (and code
    nested in it) names, and a bound method's instance attributes."""
    out = []
    self = getattr(fn, "__self__", None)
    if self is not None:
        out += list(getattr(self, "__dict__", {}).values())
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return out
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    stack, seen = [code], set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        out += [fn.__globals__[n] for n in c.co_names if n in fn.__globals__]
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    return out


def find(fn):
    """The Step for fn when its code reads torch.optim optimizers, else None."""
    values = _read_values(fn)
    optimizers = [v for v in values if isinstance(v, torch.optim.Optimizer)]
    if not optimizers:
        return None
    modules = [v for v in values if isinstance(v, torch.nn.Module)]
    return Step(list(dict.fromkeys(optimizers)), list(dict.fromkeys(modules)))


class Step:
    """The optimizers and modules a step function reads, and what its graph is lent."""

    def __init__(self, optimizers, modules):
        self.optimizers, self.modules = optimizers, modules

    def params(self):
        return list(dict.fromkeys(p for o in self.optimizers for g in o.param_groups for p in g["params"]))

    def ready(self):
        """Whether every optimizer has made its state (its first step() ran)."""
        return all(len(o.state) > 0 for o in self.optimizers)

    def slots(self):
        """(owner dict, key, name) of every tensor the graph is lent, in a fixed order: the
        modules' parameters and buffers, the optimizers' other parameters, the .grad tensors,
        the optimizers' state tensors."""
        from .compile import _state
        out, seen = [], set()
        for i, m in enumerate(self.modules):
            for d, k, name in _state(m):
                if id(d[k]) not in seen:
                    seen.add(id(d[k]))
                    out.append((d, k, f"module{i}.{name}"))
        params = self.params()
        for i, p in enumerate(params):
            if id(p) not in seen:
                seen.add(id(p))
                out.append(({"param": p}, "param", f"param{i}"))
        for i, p in enumerate(params):
            if p.grad is not None:
                out.append(({"grad": p.grad}, "grad", f"param{i}.grad"))
        for j, o in enumerate(self.optimizers):
            for i, p in enumerate(params):
                state = o.state.get(p, {})
                for k, v in state.items():
                    if isinstance(v, torch.Tensor):
                        out.append((state, k, f"optimizer{j}.param{i}.{k}"))
        return out

    def structure(self):
        """What a trace must leave as it found it: each .grad's identity, each state entry's."""
        params = self.params()
        grads = tuple(id(p.grad) if p.grad is not None else None for p in params)
        states = tuple((id(p), k, id(v)) for o in self.optimizers for p in params
                       for k, v in o.state.get(p, {}).items())
        return grads, states

    def guards(self):
        """(key, triples) as guards.state gives them: the modules' state, each optimizer's
        hyperparameters by value, which parameters it holds, each .grad present or not, and
        its state entries."""
        b = guards._Builder()
        for m in self.modules:
            for prefix, sub in m.named_modules(remove_duplicate=False):
                b.module(prefix, sub)
        for o in self.optimizers:
            b.key.append(("optimizer", type(o).__name__, id(o)))
            for g in o.param_groups:
                for k, v in g.items():
                    if k != "params":
                        b.value(g, k, v)
                b.key.append(("params", tuple(id(p) for p in g["params"])))
            b.size(o.state)
            for p in self.params():
                b.triples += (p, "grad", p.grad)
                b.key.append(("grad", None if p.grad is None else (id(p.grad), tuple(p.grad.shape), p.grad.dtype)))
                state = o.state.get(p)
                if state is not None:
                    b.size(state)
                    for k, v in state.items():  # a tensor by identity only: each step updates it
                        part = (k, id(v), tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else (k, repr(v))
                        b.item(state, k, v, part)
        return tuple(b.key), tuple(b.triples)

    def capture(self, call, args, slots):
        """The aten graph of call(None, *args), the slots' tensors as placeholders after args."""
        tensors = [d[k] for d, k, _ in slots]
        saved = [t.detach().clone() for t in tensors]
        params = self.params()
        grads = [p.grad for p in params]
        flags = [(g, k, g[k]) for o in self.optimizers for g in o.param_groups for k in ("differentiable", "foreach")
                 if k in g]
        flags += [(o.defaults, "foreach", o.defaults["foreach"]) for o in self.optimizers if "foreach" in o.defaults]
        before = self.structure()
        structure, n = [], len(args)

        def run(*ts):
            with _NoValues(), autograd._TrainingBatchNorm():
                out = call(None, *ts[:n])
            flat, spec = pytree.tree_flatten(out)
            structure.append(spec)
            return pytree.tree_unflatten([t.detach() if isinstance(t, torch.Tensor) else t for t in flat], spec)

        for g, k, _ in flags:
            # differentiable: torch.optim's tensor formulas, no .item() of the step count; not
            # foreach: its multi-tensor code refuses that flag and reads the step count with
            # .item(), and zero_grad's (the defaults' flag) has no functional form (each
            # parameter's update is the same arithmetic either way)
            g[k] = k == "differentiable"
        adamw, _ADAMW.adamw = _ADAMW.adamw, _adamw
        try:
            first = make_fx(run)(*[a.detach().clone() for a in args], *tensors)
        except TraceFailed:
            raise
        except Exception as exc:
            raise TraceFailed(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
        finally:
            _ADAMW.adamw = adamw
            for g, k, flag in flags:
                g[k] = flag
            with torch.no_grad():
                for t, s in zip(tensors, saved):
                    t.copy_(s)
            for p, g in zip(params, grads):
                p.grad = g
        if self.structure() != before:
            raise NotReady()

        def replay(*ts):
            return torch.fx.Interpreter(first).run(*ts)

        table = dict(decompositions())
        table.update(autograd._decompositions())  # training-mode batch norm, backward ops
        gm = make_fx(functorch.functionalize(replay), decomposition_table=table)(
            *[t.detach().clone() for t in list(args) + tensors])
        _drop_unused_factories(gm)
        return Graph(gm, True, {}, structure[0], False)


def _adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
           weight_decay, eps, maximize, **_):
    """torch.optim.AdamW's update with the bias corrections as tensor arithmetic on the step
    count (torch 1.13's AdamW reads it with .item() unless capturable, which it allows on CUDA
    only): decoupled weight decay, the two moments, then the parameter moved by
    lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps); v is the running maximum of
    the second moments with amsgrad."""
    for i, param in enumerate(params):
        grad = -grads[i] if maximize else grads[i]
        step = state_steps[i]
        step += 1
        param.mul_(1 - lr * weight_decay)
        exp_avgs[i].mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sqs[i].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        second = exp_avg_sqs[i]
        if amsgrad:
            max_exp_avg_sqs[i].copy_(torch.maximum(max_exp_avg_sqs[i], second))
            second = max_exp_avg_sqs[i]
        correction1 = 1 - torch.pow(beta1, step)
        correction2 = 1 - torch.pow(beta2, step)
        denom = second.sqrt() / correction2.sqrt() + eps
        param.sub_(exp_avgs[i] / denom * (lr / correction1))


def _drop_unused_factories(gm):
    """Removes what torch.optim's profiling records leave: tensors made and never read."""
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and not node.users and node.target in (aten.zeros.default,
                                                                            aten.empty.memory_format):
            gm.graph.erase_node(node)
    gm.recompile()
