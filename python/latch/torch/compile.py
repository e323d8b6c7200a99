"""latch.torch.compile: trace once, guard every call.

The first call captures the aten graph (latch/torch/capture.py: make_fx through
functionalization and decompositions, parameters and buffers as placeholders after the
inputs) and creates a latch Function (latch_function_new_step) whose trace walks that graph
with latch ops; a write-back in the graph (an input or buffer updated in place) is an
assignment latch applies to the tensor it was lent. Calls go through the Function in C: the
torch-side guards (CPU, contiguous, the module's parameters and buffers: which tensors, their
addresses and versions) and latch's guards (dtypes, dims, symbolic sizes under latch's shape
policy), then the cached executable. A guard failure traces again (make_fx at the new
sizes, once per size signature).

Calls the C path does not take come here (_slow_call): keyword arguments, Python scalars,
lists, tuples and dicts of tensors, non-contiguous tensors. Their tensors, made contiguous,
go to a variant (a Compiled of its own) per structure and constant values: other constants
trace again. A 0-size tensor, a dtype latch has no type for or a tensor on another device
runs that call eagerly, the reason said once on stderr; a numpy array is a TypeError.

An aten op latch does not lower runs eagerly between compiled parts of the graph (capture.
split): the log says which op and how many parts, once. A trace that fails (data-dependent
control flow, .item()) runs the function eagerly from then on, the reason said once."""
import functools
import operator
import sys

import torch
from torch.utils import _pytree as pytree

from .. import _latch
from . import autograd, dtypes as D, guards, step as train_step
from .capture import Resized, TraceFailed, capture, plain, split, unlowered_nodes
from . import check as check_eager
from .lowering import LOWERINGS

TRACE_ONCE, TRACE_EVERY, TRACE_EAGER = 0, 1, 2
SHAPES = {None: 0, True: 0, False: 1}  # latch_shape_policy: automatic, automatic with the batch marked, static


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


def _named_state(module):
    return [(name, d[k]) for d, k, name in _state(module)]


def _load(env, a):
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_load(env, x) for x in a)
    if isinstance(a, dict):
        return {k: _load(env, v) for k, v in a.items()}
    return a


def interpret(gm, inputs, attrs, overrides=None, failed=None, env=None):
    """The make_fx graph gm over latch Tensors: inputs for its placeholders, in order, and
    attrs for the get_attr nodes that read parameters and buffers (by target). A lowering
    that raises Unsupported leaves the node's name in failed (a list), for a split.
    overrides: lowerings used instead of the table's for some overloads (training graphs).
    env: a dict that keeps every node's value (the eager check's op-by-op comparison)."""
    # No closure over env: a cycle would keep the trace's pending tensors alive after it,
    # and a later sync would compute them again (an in-place update applied twice).
    env, placeholders = {} if env is None else env, iter(inputs)
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
                continue
            if overrides and node.target in overrides:
                env[node] = overrides[node.target](*args, **kwargs)
                continue
            try:
                env[node] = _latch.lower(node.target, tuple(args), kwargs or None)  # LOWERINGS, common ops in C
            except _latch.Unsupported:
                if failed is not None:
                    failed.append(node.name)
                raise
        elif node.op == "output":
            return [env[a] if isinstance(a, torch.fx.Node) else a for a in pytree.tree_flatten(plain(node.args[0]))[0]]
        else:
            raise _latch.Unsupported(f"fx node {node.op} {node.target}")


def unlowered(gm):
    """The first aten op of gm latch does not lower, or None."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and node.target not in LOWERINGS:
            return node.target
    return None


def _hashable(v):
    try:
        hash(v)
        return (type(v).__name__, v)
    except TypeError:
        return (type(v).__name__, repr(v))


def _input_problem(t):
    """Why latch cannot take tensor t for this call, or None."""
    if not t.device.type == "cpu":
        return f"a tensor on device {t.device} (latch takes CPU tensors)"
    if t.dtype not in D.TO_LATCH:
        return f"dtype {t.dtype} has no latch type"
    return None


class _Graphs:
    """What one guard state traced: its latch Function (None for a split graph), its captured
    graphs (one per input signature), the parameter slots it lends, and for a graph with ops
    latch does not lower, the split plans."""

    def __init__(self, module, step=None):
        self.state = step.slots() if step is not None else _state(module)
        self.function = None
        self.autograd = None      # autograd.AutogradGraphs when the calls record autograd
        self.graphs = {}          # input signature -> capture.Graph
        self.split_mode = False   # calls run plans
        self.plans = {}           # input signature -> (split GraphModule or Compiled, capture.Graph)
        self.eager_nodes = set()  # nodes whose lowering raised Unsupported: run eagerly
        self.checked = False      # the eager check ran (on the first call)


class Compiled(_latch.Compiled):
    """What latch.torch.compile returns: call it as the function or module it wraps. A warm
    call never enters Python: _latch.Compiled's call (python/src/compiled.c) checks the guards
    (latch/torch/guards.py), runs self.function and returns its torch outputs; it calls
    _slow_call before the first trace, after a guard failed, after a fallback and for a split
    graph, _bad_args for the arguments it does not take (keywords, non-tensor or
    non-contiguous arguments), _unsupported when latch cannot lower the graph, and _pack to
    build a result that is not one tensor. Each guard state (grad mode, the inputs'
    requires_grad, the module's state) has its own Function: a state seen before takes its
    graphs back without a trace."""

    def __init__(self, fn, dynamic=None, mode=TRACE_ONCE, name=None, fullgraph=False, recompile_limit=-1,
                 module=None, call=None, check=None, precision=None):
        self.fn = fn
        self.precision = precision  # 'f32', 'bf16', or None: the runtime's (LATCH_PRECISION)
        self.fullgraph, self.recompile_limit = fullgraph, recompile_limit
        self.module = module if module is not None else fn if isinstance(fn, torch.nn.Module) else None
        # call(module or None, *args): the traced call, the module given (a trace's twin or
        # the module itself, its state swapped); a variant's rebuilds its arguments first
        self.call = call or (lambda m, *a, **kw: (m if m is not None else fn)(*a, **kw))
        self.variant = call is not None
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        if dynamic not in SHAPES:
            raise ValueError(f"latch.torch.compile: dynamic must be None, True or False, not {dynamic!r}")
        self.mode, self.dynamic, self.shapes = mode, dynamic, SHAPES[dynamic]
        self.function = None
        self.eager_reason = None
        self.states = {}  # guard key -> _Graphs
        self.current = None
        self.grad_query = torch.is_grad_enabled
        self.variants = {}  # (argument structure, constants) -> Compiled over the tensors
        self.said = set()   # messages already on stderr
        self.eager_ops = []  # the ops that run eagerly between compiled parts (a split graph)
        self._failed = []   # the node whose lowering raised Unsupported in the last trace
        self._calling = False  # inside _slow_call's own call of the Function
        self.check = check_eager.wanted(check)  # each graph's first call against eager PyTorch
        # a plain function that reads torch.optim optimizers: a whole training step (step.py)
        self.step = train_step.find(fn) if self.module is None else None

    # ---- tracing ----

    def _signature(self, graphs, args):
        return tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in args) + \
            tuple((tuple(d[k].shape), d[k].dtype) for d, k, _ in graphs.state)

    def _capture(self, graphs, args):
        key = self._signature(graphs, args)
        if key not in graphs.graphs and self.step is not None:
            graphs.graphs[key] = self.step.capture(self.call, args, graphs.state)
        elif key not in graphs.graphs:
            graphs.graphs[key] = capture(self.call, self.module, _named_state, args)
        return graphs.graphs[key]

    def _trace(self, graphs, inputs, args):
        """Called by latch (inside latch_call) to trace: inputs are this call's latch Tensors,
        the torch inputs first, then the parameters and buffers; args the call's torch
        tensors."""
        g = self._capture(graphs, args)
        if g.functional:
            if unlowered_nodes(g.gm, graphs.eager_nodes):
                raise _latch.Unsupported("the graph at these sizes has ops latch does not lower")
            outs = interpret(g.gm, inputs, {}, failed=self._failed)
        else:
            op = unlowered(g.gm)
            if op is not None:
                raise _latch.Unsupported(f"{op} is not lowered")
            n = len(args)
            outs = interpret(g.gm, inputs[:n], {target: inputs[n + i] for target, i in g.attrs.items()})
        return [outs[i] for i in g.tensor_leaves]

    # ---- calls ----

    def _say(self, text):
        if text not in self.said:
            self.said.add(text)
            print(f"latch: compile: {self.name}: {text}", file=sys.stderr)

    def _eager(self, args, kwargs):
        return self.call(self.module, *args, **kwargs)

    def _fall_back(self, reason, args, kwargs):
        if self.fullgraph:  # compile(fullgraph=True): no eager fallback, no split
            raise _latch.Unsupported(f"latch.torch.compile(fullgraph=True): {self.name}: {reason}")
        if self.eager_reason is None:
            self.eager_reason = reason
            self.function = None  # calls take _slow_call, which runs fn
            self.guards = None
            self._say(f"{reason}; running it eagerly")
        return self._eager(args, kwargs)

    def _start(self, graphs, args):
        """The Function for a new guard state, or its split mode; a reason to run eagerly, or None."""
        self._failed = []
        try:
            g = self._capture(graphs, args)
        except TraceFailed as e:
            return f"the trace failed ({e})"
        graphs.spec, graphs.leaves, graphs.tensor_leaves = g.spec, g.leaves, g.tensor_leaves
        graphs.single = isinstance(g.spec, pytree.LeafSpec) and g.tensor_leaves == [0]
        if g.needs_grad and autograd.available():
            if not self.variant:
                graphs.autograd = autograd.AutogradGraphs(self.fn, self.module, graphs.state, self.name, self.check,
                                                          self.precision)
            elif self.module is None:  # the variant's call rebuilds the arguments
                graphs.autograd = autograd.AutogradGraphs(lambda *a: self.call(None, *a), None, [], self.name,
                                                         self.check, self.precision)
            else:
                return "a module's call with keywords, Python values or structures that records autograd"
            return None
        if not g.functional:
            op = unlowered(g.gm)
            if op is not None:
                return f"aten op {op} is not lowered"
        elif unlowered_nodes(g.gm, graphs.eager_nodes):
            if self.fullgraph or self.step is not None:  # a step's write-backs stay in one graph
                ops = sorted({str(n.target) for n in unlowered_nodes(g.gm, graphs.eager_nodes)})
                return f"{', '.join(ops)} not lowered"
            graphs.split_mode = True  # calls go to _slow_call, which runs plans
            return None
        # dynamic=True: each input's first (batch) dim symbolic from the first trace; other
        # dims that change later become symbolic under latch's automatic policy
        marks = [(i, 0) for i, a in enumerate(args) if a.dim() > 0] if self.dynamic is True else None
        # the graph random numbers (dropout outside autograd) seeded from torch's seed when
        # the graph is made, as the autograd path's are
        seed = (torch.initial_seed() * 0x9E3779B97F4A7C15 + 3) % (1 << 64)
        graphs.function = _latch.Function(functools.partial(self._trace, graphs), len(g.tensor_leaves),
                                          name=self.name, mode=self.mode, shapes=self.shapes, marks=marks,
                                          recompile_limit=self.recompile_limit, precision=self.precision, seed=seed)
        graphs.function.set_params([(d, k) for d, k, _ in graphs.state])
        return None

    def _select(self, args):
        """The graphs for this call's guard state (started on first sight) made current, with
        the guards the warm call checks; a reason to run eagerly, or None."""
        key, triples = guards.state(self.fn, self.module)
        if self.step is not None:
            step_key, step_triples = self.step.guards()
            key, triples = (key, step_key), triples + step_triples
        grad_mode, input_grads = torch.is_grad_enabled(), tuple(a.requires_grad for a in args)
        full = (grad_mode, input_grads, key)
        graphs = self.states.get(full)
        if graphs is None:
            graphs = _Graphs(self.module, self.step)
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
        if self.current.split_mode:
            return self._run_plan(self.current, args)
        checking = self.check and not self.current.checked
        if checking:  # the inputs as they were: the graph may update them in place
            g = self._capture(self.current, args)
            inputs = list(args) + ([d[k] for d, k, _ in self.current.state] if g.functional else [])
            before = [t.detach().clone() for t in inputs]
        self._calling = True
        try:
            outs = [D.to_torch(t) for t in self.function(*args)]
        except _latch.Unsupported as exc:
            return self._unsupported(exc, args)
        finally:
            self._calling = False
        if checking:
            self.current.checked = True
            check_eager.compare(self.name, g.gm, before, pytree.tree_flatten(self._pack(outs))[0], self.precision,
                                written=inputs)
        return outs[0] if self.single else self._pack(outs)

    # ---- partial graphs ----

    def _plan(self, graphs, args):
        """The split plan for args' signature: its lowered parts compiled (each a Compiled)."""
        key = self._signature(graphs, args)
        if key in graphs.plans:
            return graphs.plans[key]
        g = self._capture(graphs, args)
        parts = split(g.gm, graphs.eager_nodes)
        if parts is None:  # these sizes lower whole
            graphs.plans[key] = (Compiled(g.gm, dynamic=self.dynamic, mode=self.mode, name=self.name,
                                          recompile_limit=self.recompile_limit, precision=self.precision), g)
            return graphs.plans[key]
        cut, kinds, ops = parts
        for name, lowered in kinds.items():
            if lowered:  # the part's call finds the Compiled (not a Module) in the instance dict
                part = Compiled(getattr(cut, name), dynamic=self.dynamic, mode=self.mode, name=f"{self.name}.{name}",
                                recompile_limit=self.recompile_limit, precision=self.precision)
                delattr(cut, name)
                cut.__dict__[name] = part
        count = sum(kinds.values())
        self.eager_ops += [op for op in ops if op not in self.eager_ops]
        self._say(f"{', '.join(ops)} {'is' if len(ops) == 1 else 'are'} not lowered: "
                  f"{'it runs' if len(ops) == 1 else 'they run'} eagerly, {count} compiled part{'s' if count != 1 else ''} around")
        graphs.plans[key] = (cut, g)
        return graphs.plans[key]

    def _run_plan(self, graphs, args):
        """The split plan's call; when an eager op's result has another size than at the trace
        (a boolean mask's count), the call traces again at these values."""
        for attempt in range(2):
            cut, g = self._plan(graphs, args)
            state = [d[k] for d, k, _ in graphs.state] if g.functional else []
            try:
                out = cut(*args, *state)
            except Resized as e:
                if attempt:
                    raise
                self._say(f"{e}: a call with another result size traces again")
                key = self._signature(graphs, args)
                graphs.graphs.pop(key, None)
                graphs.plans.pop(key, None)
                continue
            return pytree.tree_unflatten(pytree.tree_flatten(out)[0], g.spec)

    # The warm call is _latch.Compiled's (C): the guards, the cached executable, torch
    # outputs. These are its Python paths.

    def _unsupported(self, exc, args):
        """A lowering raised Unsupported in the trace: split around that node, or run eagerly."""
        failed, self._failed = self._failed, []
        graphs = self.current
        g = graphs.graphs.get(self._signature(graphs, args)) if graphs is not None else None
        if g is not None and g.functional and not self.fullgraph and self.step is None and (failed or unlowered_nodes(g.gm, graphs.eager_nodes)):
            graphs.eager_nodes.update(failed)
            graphs.function, graphs.split_mode, self.function = None, True, None
            return self._run_plan(graphs, args)
        return self._fall_back(str(exc), args, {})

    def _bad_args(self, exc, args):
        """The C path refused an argument: normalized by _slow_call, unless it came from there."""
        if self._calling:
            raise exc
        return self._slow_call(args, None)

    def _pack(self, outs):
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_leaves, outs):
            leaves[i] = t
        return pytree.tree_unflatten(leaves, self.spec)

    def _variant(self, args, kwargs):
        """Any call: flattened, its tensors made contiguous and passed to the variant for its
        structure and constants (a Compiled of its own); in-place updates copied back."""
        flat, spec = pytree.tree_flatten((list(args), kwargs))
        where = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
        tensor_at = set(where)
        key = (repr(spec), tuple((i, _hashable(v)) for i, v in enumerate(flat) if i not in tensor_at))
        variant = self.variants.get(key)
        if variant is None:
            base = self.call

            def call(m, *tensors, flat=list(flat), where=where, spec=spec):
                for i, t in zip(where, tensors):
                    flat[i] = t
                a, kw = pytree.tree_unflatten(flat, spec)
                return base(m, *a, **kw)

            variant = Compiled(self.fn, dynamic=self.dynamic, mode=self.mode, name=self.name, fullgraph=self.fullgraph,
                               recompile_limit=self.recompile_limit, module=self.module, call=call,
                               precision=self.precision)
            self.variants[key] = variant
        tensors = [flat[i] for i in where]
        dense = [t.contiguous() for t in tensors]
        before = [t.clone() if d is not t else None for t, d in zip(tensors, dense)]
        out = variant(*dense)
        for t, d, b in zip(tensors, dense, before):
            if b is not None and not torch.equal(d, b):
                t.copy_(d)  # an in-place update of a non-contiguous argument
        return out

    def _slow_call(self, args, kwargs):
        """Before the first trace, after a guard failed, after a fallback, for a split graph,
        and the calls the C path does not take (kwargs: a dict or None)."""
        kwargs = kwargs or {}
        if self.eager_reason is not None:
            return self._eager(args, kwargs)
        flat = pytree.tree_flatten((list(args), kwargs))[0]
        for v in flat:
            if type(v).__module__ == "numpy" and type(v).__name__ == "ndarray":
                raise TypeError(f"latch.torch.compile: {self.name}: an argument is a numpy array; "
                                "pass a torch tensor (torch.from_numpy)")
        tensors = [v for v in flat if isinstance(v, torch.Tensor)]
        for t in tensors:
            problem = _input_problem(t)
            if problem:
                self._say(f"{problem}: that call runs eagerly")
                return self._eager(args, kwargs)
        if any(t.numel() == 0 for t in tensors):
            return self._eager(args, kwargs)  # a 0-size batch: eager's result and shape
        if kwargs or not all(isinstance(a, torch.Tensor) and a.is_contiguous() for a in args):
            return self._variant(args, kwargs)
        current = self.current
        if current is not None and current.autograd is not None and self._guards_hold(args):
            return current.autograd.call(args)
        if self.step is not None and not self.step.ready():
            return self._eager(args, kwargs)  # torch.optim makes its state in its first step
        try:
            reason = self._select(args)
        except train_step.NotReady:  # this call makes or replaces state: the next one traces
            return self._eager(args, kwargs)
        if reason:
            return self._fall_back(reason, args, kwargs)
        if self.current.autograd is not None:
            return self.current.autograd.call(args)
        return self._run(args)

    def stats(self):
        """latch_function_stats summed over the guard states' Functions and the variants'."""
        total = {}
        parts = [g.function.stats() for g in self.states.values() if g.function is not None]
        parts += [f.stats() for g in self.states.values() if g.autograd is not None for f in g.autograd.functions]
        for d in parts + [v.stats() for v in self.variants.values()]:
            for k, v in d.items():
                total[k] = total.get(k, 0) + v
        return total
