"""latch.torch.compile: trace once, guard every call.

The first call captures the aten graph with make_fx (on copies of the inputs and parameters,
so a traced in-place update is not applied twice), checks that latch lowers every op in it,
and creates a latch Function (latch_function_new_step) whose trace walks that graph with
latch ops. Calls go through the Function in C: the torch-side guards (CPU, contiguous, the
module's parameters and buffers: which tensors, their addresses and versions) and latch's
guards (dtypes, dims, symbolic sizes under latch's shape policy), then the cached executable.
A guard failure traces again (make_fx at the new sizes, once per size signature). An aten op
latch does not lower makes the whole function run eagerly from then on, said once on stderr
with the op's name."""
import copy
import functools
import operator
import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from .. import _latch
from . import autograd, dtypes, guards
from .lowering import LOWERINGS

TRACE_ONCE, TRACE_EVERY, TRACE_EAGER = 0, 1, 2
SHAPES = {None: 0, True: 0, False: 1}  # latch_shape_policy: automatic, automatic with the batch marked, static


def _copy(t):
    c = t.detach().clone()
    return c.requires_grad_(t.requires_grad) if t.is_floating_point() else c


def _state(module):
    """(owner dict, key, full name) of every parameter and buffer, in a fixed order."""
    entries = []
    if module is None:
        return entries
    for prefix, sub in module.named_modules():
        for kind in ("_parameters", "_buffers"):
            d = getattr(sub, kind)
            for key, value in d.items():
                if value is not None:
                    entries.append((d, key, f"{prefix}.{key}" if prefix else key))
    return entries


def _plain(a):
    """fx's immutable lists and dicts as plain ones (pytree knows those)."""
    if isinstance(a, (list, tuple)):
        return (list if isinstance(a, list) else tuple)(_plain(x) for x in a)
    if isinstance(a, dict):
        return {k: _plain(v) for k, v in a.items()}
    return a


def _load(env, a):
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_load(env, x) for x in a)
    if isinstance(a, dict):
        return {k: _load(env, v) for k, v in a.items()}
    return a


def interpret(gm, inputs, attrs):
    """The make_fx graph gm over latch Tensors: inputs for its placeholders, in order, and
    attrs for the get_attr nodes that read parameters and buffers (by target)."""
    # No closure over env: a cycle would keep the trace's pending tensors alive after it,
    # and a later sync would compute them again (an in-place update applied twice).
    env, placeholders = {}, iter(inputs)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "get_attr":
            found = attrs.get(node.target)
            env[node] = found if found is not None else _latch.from_torch(getattr(gm, node.target).detach().contiguous())
        elif node.op == "call_function":
            args, kwargs = _load(env, node.args), _load(env, node.kwargs)
            if node.target is operator.getitem:
                env[node] = args[0][args[1]]
            else:
                env[node] = _latch.lower(node.target, tuple(args), kwargs or None)  # LOWERINGS, common ops in C
        elif node.op == "output":
            return [env[a] if isinstance(a, torch.fx.Node) else a for a in pytree.tree_flatten(_plain(node.args[0]))[0]]
        else:
            raise _latch.Unsupported(f"fx node {node.op} {node.target}")


def unlowered(gm):
    """The first aten op of gm latch does not lower, or None."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and node.target not in LOWERINGS:
            return node.target
    return None


class _Graphs:
    """What one guard state traced: its latch Function, its make_fx graphs (one per input
    signature) and the parameter slots it lends."""

    def __init__(self, module):
        self.state = _state(module)
        self.function = None
        self.autograd = None  # autograd.AutogradGraphs when the calls record autograd
        self.graphs = {}  # input signature -> (make_fx graph, output spec, leaves, tensor leaves, attrs)


class Compiled(_latch.Compiled):
    """What latch.torch.compile returns: call it as the function or module it wraps. A warm
    call never enters Python: _latch.Compiled's call (python/src/compiled.c) checks the guards
    (latch/torch/guards.py), runs self.function and returns its torch outputs; it calls
    _slow_call before the first trace, after a guard failed and after a fallback,
    _unsupported when latch cannot lower the graph, and _pack to build a result that is not
    one tensor. Each guard state (grad mode, the inputs' requires_grad, the module's state)
    has its own Function: a state seen before takes its graphs back without a trace."""

    def __init__(self, fn, dynamic=None, mode=TRACE_ONCE, name=None, fullgraph=False, recompile_limit=-1):
        self.fn = fn
        self.fullgraph, self.recompile_limit = fullgraph, recompile_limit
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        if dynamic not in SHAPES:
            raise ValueError(f"latch.torch.compile: dynamic must be None, True or False, not {dynamic!r}")
        self.mode, self.dynamic, self.shapes = mode, dynamic, SHAPES[dynamic]
        self.function = None
        self.eager_reason = None
        self.states = {}  # guard key -> _Graphs
        self.current = None
        self.grad_query = torch.is_grad_enabled

    # ---- tracing ----

    def _signature(self, graphs, args):
        return tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in args) + \
            tuple((tuple(d[k].shape), d[k].dtype) for d, k, _ in graphs.state)

    def _capture(self, graphs, args):
        """make_fx on copies (of the module too: a traced in-place update must not be applied
        twice); parameters and buffers appear as get_attr nodes, mapped back to their index."""
        key = self._signature(graphs, args)
        if key in graphs.graphs:
            return graphs.graphs[key]
        copies = [_copy(a) for a in args]
        module = copy.deepcopy(self.module) if self.module is not None else None
        fn = module if module is not None else self.fn
        copy_state = _state(module)
        index = {id(d[k]): i for i, (d, k, _) in enumerate(copy_state)}
        structure, needs_grad = [], []

        def traced(*args):
            out = fn(*args)
            flat_out, spec = pytree.tree_flatten(out)
            structure.append(spec)
            needs_grad.append(any(isinstance(t, torch.Tensor) and t.requires_grad for t in flat_out))
            return out

        gm = make_fx(traced)(*copies)
        gm.latch_needs_grad = torch.is_grad_enabled() and needs_grad[0]  # the autograd path's
        attrs = {n.target: index[id(getattr(gm, n.target))] for n in gm.graph.nodes
                 if n.op == "get_attr" and id(getattr(gm, n.target)) in index}
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        leaves, spec = pytree.tree_flatten(_plain(out_node.args[0]))[0], structure[0]
        tensor_leaves = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node)]
        graphs.graphs[key] = entry = (gm, spec, leaves, tensor_leaves, attrs)
        return entry

    def _trace(self, graphs, inputs, args):
        """Called by latch (inside latch_call) to trace: inputs are this call's latch Tensors,
        the torch inputs first, then the parameters and buffers; args the call's torch
        tensors."""
        gm, _, leaves, tensor_leaves, attrs = self._capture(graphs, args)
        op = unlowered(gm)
        if op is not None:
            raise _latch.Unsupported(f"{op} is not lowered")
        n = len(args)
        outs = interpret(gm, inputs[:n], {target: inputs[n + i] for target, i in attrs.items()})
        return [outs[i] for i in tensor_leaves]

    # ---- calls ----

    def _fall_back(self, reason, args, kwargs):
        if self.fullgraph:  # compile(fullgraph=True): no eager fallback, no split
            raise _latch.Unsupported(f"latch.torch.compile(fullgraph=True): {self.name}: {reason}")
        if self.eager_reason is None:
            self.eager_reason = reason
            self.function = None  # calls take _slow_call, which runs fn
            self.guards = None
            print(f"latch: compile: {self.name}: {reason}; running it eagerly", file=sys.stderr)
        return self.fn(*args, **kwargs)

    def _start(self, graphs, args):
        gm, graphs.spec, graphs.leaves, tensor_leaves, _ = self._capture(graphs, args)
        graphs.tensor_leaves = tensor_leaves
        graphs.single = isinstance(graphs.spec, pytree.LeafSpec) and tensor_leaves == [0]
        if gm.latch_needs_grad and autograd.available():
            graphs.autograd = autograd.AutogradGraphs(self.fn, self.module, graphs.state, self.name)
            return None
        op = unlowered(gm)
        if op is not None:
            return f"aten op {op} is not lowered"
        # dynamic=True: each input's first (batch) dim symbolic from the first trace; other
        # dims that change later become symbolic under latch's automatic policy
        marks = [(i, 0) for i, a in enumerate(args) if a.dim() > 0] if self.dynamic is True else None
        graphs.function = _latch.Function(functools.partial(self._trace, graphs), len(tensor_leaves), name=self.name,
                                          mode=self.mode, shapes=self.shapes, marks=marks,
                                          recompile_limit=self.recompile_limit)
        graphs.function.set_params([(d, k) for d, k, _ in graphs.state])
        return None

    def _select(self, args):
        """The graphs for this call's guard state (started on first sight) made current, with
        the guards the warm call checks; a reason to run eagerly, or None."""
        key, triples = guards.state(self.fn, self.module)
        grad_mode, input_grads = torch.is_grad_enabled(), tuple(a.requires_grad for a in args)
        full = (grad_mode, input_grads, key)
        graphs = self.states.get(full)
        if graphs is None:
            graphs = _Graphs(self.module)
            reason = self._start(graphs, args)
            if reason:
                return reason
            self.states[full] = graphs
        self.current, self.function = graphs, graphs.function
        self.spec, self.leaves, self.tensor_leaves, self.single = \
            graphs.spec, graphs.leaves, graphs.tensor_leaves, graphs.single
        self.guards, self.grad_mode, self.input_grads = triples, grad_mode, input_grads
        return None

    def _run(self, args):
        """The current Function's call, as the warm call makes it, without its guards (just
        set: a guard that never holds by identity must not send the call round again)."""
        try:
            outs = [dtypes.to_torch(t) for t in self.function(*args)]
        except _latch.Unsupported as exc:
            return self._unsupported(exc, args)
        return outs[0] if self.single else self._pack(outs)

    # The warm call is _latch.Compiled's (C): the guards (a non-tensor argument is a
    # TypeError there), the cached executable, torch outputs. These are its Python paths.

    def _unsupported(self, exc, args):
        return self._fall_back(str(exc), args, {})

    def _pack(self, outs):
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_leaves, outs):
            leaves[i] = t
        return pytree.tree_unflatten(leaves, self.spec)

    def _slow_call(self, args, kwargs):
        """Before the first trace, after a guard failed, after a fallback, or with keyword
        arguments (kwargs: a dict or None)."""
        kwargs = kwargs or {}
        if self.eager_reason is not None:
            return self.fn(*args, **kwargs)
        if kwargs or not all(isinstance(a, torch.Tensor) for a in args):
            return self._fall_back("keyword or non-tensor arguments are not compiled", args, kwargs)
        current = self.current
        if current is not None and current.autograd is not None and self._guards_hold(args):
            return current.autograd.call(args)
        reason = self._select(args)
        if reason:
            return self._fall_back(reason, args, kwargs)
        if self.current.autograd is not None:
            return self.current.autograd.call(args)
        return self._run(args)

    def stats(self):
        """latch_function_stats summed over the guard states' Functions."""
        total = {}
        for graphs in self.states.values():
            for k, v in (graphs.function.stats() if graphs.function else {}).items():
                total[k] = total.get(k, 0) + v
        return total

