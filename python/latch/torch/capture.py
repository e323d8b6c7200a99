"""latch.torch.capture: a function or module as an aten graph latch can lower.

capture() runs make_fx over a functional form of the call: the module's parameters and
buffers become placeholders after the inputs (swapped in for the trace, so the module is
not touched), functionalization turns in-place and view-mutating ops into out-of-place ops
with explicit write-backs (an `aten.copy_` of the new value into the input or buffer it
updated, at the end of the graph), and a decomposition table breaks every op latch does not
lower into smaller ones. The table is PyTorch's own (torch._decomp's aten-to-aten
decompositions) less the ops latch keeps whole (LOWERINGS: softmax, layer norm, GELU,
batch norm, attention, ...); torch._refs' decompositions, which reach prims, are left out.

The call is traced twice: as it is (the function's Python sees the tensors as they are),
then that aten graph replayed through functionalization and the decompositions. A call
whose state cannot be swapped in (autograd inside the function: a training step) is traced
as it is, on a copy of the module, its parameters read through get_attr nodes
(the in-place updates lowered by LOWERINGS' in-place forms). A trace that fails both ways
(data-dependent control flow, .item()) raises TraceFailed with PyTorch's reason.

split() cuts a captured graph around the nodes latch does not lower, for partial graphs."""
import copy
import operator

import functorch
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.split_module import split_module
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils import _pytree as pytree

from . import lowering_core  # noqa: F401 (registers the core set's lowerings)
from .lowering import LOWERINGS


class TraceFailed(Exception):
    """make_fx could not trace the call; the message is PyTorch's first line."""


_TABLE = None


def decompositions():
    """torch._decomp's aten-level decompositions of the ops latch does not lower."""
    global _TABLE
    if _TABLE is None:
        from torch._decomp import decomposition_table
        _TABLE = {op: fn for op, fn in decomposition_table.items()
                  if op not in LOWERINGS and getattr(fn, "__module__", "") == "torch._decomp.decompositions"}
    return _TABLE


def _copy(t):
    c = t.detach().clone()
    return c.requires_grad_(t.requires_grad) if t.is_floating_point() else c


def plain(a):
    """fx's immutable lists and dicts as plain ones (pytree knows those)."""
    if isinstance(a, (list, tuple)):
        return (list if isinstance(a, list) else tuple)(plain(x) for x in a)
    if isinstance(a, dict):
        return {k: plain(v) for k, v in a.items()}
    return a


class Graph:
    """A captured call. gm: the aten graph; functional: its placeholders are the inputs then
    the state (else parameters are get_attr nodes, attrs maps their targets to state indices);
    spec, leaves, tensor_leaves: the output's structure, its flat leaves and which are tensors."""

    def __init__(self, gm, functional, attrs, spec, needs_grad):
        self.gm, self.functional, self.attrs, self.spec = gm, functional, attrs, spec
        self.needs_grad = needs_grad  # grad mode on and an output requires grad: the autograd path
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        self.leaves = pytree.tree_flatten(plain(out_node.args[0]))[0]
        self.tensor_leaves = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, torch.fx.Node)]


def _functional(fn, module, state, args):
    """Placeholders are args then the state's tensors. Two traces: the call as it is (its
    Python sees the tensors as they are, requires_grad included), then that graph replayed
    under functionalization and the decompositions (aten ops only: nothing reads a flag that
    functionalization's wrappers lack)."""
    structure, needs_grad = [], []
    n, names = len(args), [name for name, _ in state]

    def run(*tensors):
        if module is None:
            out = fn(None, *tensors[:n])
        else:
            with _reparametrize_module(module, dict(zip(names, tensors[n:]))):
                out = fn(module, *tensors[:n])
        flat, spec = pytree.tree_flatten(out)
        structure.append(spec)
        needs_grad.append(torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in flat))
        return out

    tensors = list(args) + [t for _, t in state]
    first = make_fx(run)(*[_copy(t) for t in tensors])

    def replay(*tensors):
        return torch.fx.Interpreter(first).run(*tensors)

    gm = make_fx(functorch.functionalize(replay), decomposition_table=decompositions())(
        *[t.detach().clone() for t in tensors])
    return Graph(gm, True, {}, structure[0], needs_grad[0])


def _as_is(fn, module, state_of, args):
    """make_fx of the call as it is, on copies of the inputs and of the module (a traced
    in-place update must not be applied twice); parameters appear as get_attr nodes."""
    structure, needs_grad = [], []
    twin = copy.deepcopy(module) if module is not None else None
    index = {id(t): i for i, (_, t) in enumerate(state_of(twin))} if twin is not None else {}

    def traced(*a):
        out = fn(twin, *a)
        flat, spec = pytree.tree_flatten(out)
        structure.append(spec)
        needs_grad.append(torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in flat))
        return out

    gm = make_fx(traced, decomposition_table=decompositions())(*[_copy(a) for a in args])
    attrs = {n.target: index[id(getattr(gm, n.target))] for n in gm.graph.nodes
             if n.op == "get_attr" and id(getattr(gm, n.target)) in index}
    return Graph(gm, False, attrs, structure[0], needs_grad[0])


def _reason(exc):
    text = str(exc).strip().split("\n")[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def capture(fn, module, state_of, args):
    """The aten graph of fn(module, *args). module: the nn.Module whose state becomes
    placeholders after the inputs, or None; state_of(module): its [(qualified name, tensor)]
    in the compiled function's order."""
    try:
        return _functional(fn, module, state_of(module) if module is not None else [], args)
    except Exception as first:  # autograd inside the call, or a trace that fails both ways
        try:
            return _as_is(fn, module, state_of, args)
        except Exception as second:
            raise TraceFailed(_reason(second)) from first


# ---- partial graphs ----

def _lowerable(node, eager):
    return node.op != "call_function" or node.target is operator.getitem or \
        (node.target in LOWERINGS and node.name not in eager)


def unlowered_nodes(gm, eager=()):
    """The nodes of gm latch does not lower (not in LOWERINGS, or named in eager)."""
    return [n for n in gm.graph.nodes if not _lowerable(n, eager)]


class Resized(Exception):
    """An op that ran eagerly in a split graph gave a result of another size than at the
    trace (a boolean mask selecting another count): the graph after it was traced at the old
    size, so the call traces again."""


class _SizeChecked:
    """An eagerly run op that checks its tensor results have the sizes the trace saw."""

    def __init__(self, op, shapes):
        self.op, self.shapes = op, shapes
        self.__name__ = str(op)

    def __call__(self, *args, **kwargs):
        out = self.op(*args, **kwargs)
        got = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in pytree.tree_flatten(out)[0]]
        if any(want is not None and g is not None and g != want for g, want in zip(got, self.shapes)):
            raise Resized(f"{self.op} gave a result of another size than at the trace")
        return out


def _traced_shapes(node):
    """The sizes of node's tensor results at the trace, in pytree's order (fx's TensorMetadata
    is a named tuple: a leaf here)."""
    def flat(meta):
        if hasattr(meta, "shape"):
            return [tuple(meta.shape)]
        if isinstance(meta, (list, tuple)):
            return [s for m in meta for s in flat(m)]
        return [None]
    meta = node.meta.get("tensor_meta")
    return flat(meta) if meta is not None else []


def _write_back(node):
    return node.op == "call_function" and node.target is torch.ops.aten.copy_.default


def split(gm, eager=()):
    """gm cut into parts: each node that cannot be lowered (not in LOWERINGS, or named in
    eager) runs in an eager part; the others gather into as few lowered parts as their
    dependencies allow (a lowered node joins the part after the last eager node it depends
    on; the write-backs of a functional graph join the last lowered part, so a call that
    stops at an eager op has updated nothing). An eager op whose result has another size
    than at the trace raises Resized. Returns (split GraphModule, {part name: lowered?},
    [unlowered op names]) or None when every node is lowered."""
    depth, part, ops = {}, {}, []
    for node in gm.graph.nodes:
        inputs = [a for a in node.all_input_nodes if a in depth]
        d = max((depth[a] for a in inputs), default=0)
        if node.op == "call_function" and node.target is operator.getitem and inputs and part[inputs[0]] % 2:
            depth[node], part[node] = depth[inputs[0]], part[inputs[0]]  # an item of an eager result
            continue
        if _lowerable(node, eager):
            depth[node], part[node] = d, 2 * d
        else:
            depth[node], part[node] = d + 1, 2 * d + 1
            name = str(node.target)
            if name not in ops:
                ops.append(name)
    if not ops:
        return None
    last = 2 * max(depth.values())
    for node in gm.graph.nodes:
        if _write_back(node) and node.args[0].op == "placeholder":
            part[node] = last
    cut = split_module(gm, None, lambda node: part[node])
    kinds = {name: int(name.split("_")[-1]) % 2 == 0 for name, _ in cut.named_children()}
    for name, lowered in kinds.items():
        if not lowered:
            sub = getattr(cut, name)
            for node in sub.graph.nodes:
                if node.op == "call_function" and node.target is not operator.getitem and _traced_shapes(node):
                    node.target = _SizeChecked(node.target, _traced_shapes(node))
            sub.recompile()
    return cut, kinds, ops
