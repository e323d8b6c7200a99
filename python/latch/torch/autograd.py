"""Autograd through latch.torch.compile: AOTAutograd (functorch.compile in torch 1.13) with
latch compiling both halves.

When a call records autograd (grad mode on, an output of the traced function requires grad),
the module's parameters and buffers and the call's tensors become the flat inputs of one
function; AOTAutograd traces its joint forward and backward, functionalizes it, decomposes
the backward ops latch does not lower into ones it does (torch._decomp), and partitions it.
Each half is handed to latch as an fx graph: a latch Function whose trace walks that graph
(compile.interpret), called through _latch.Compiled's C call, so the activations the forward
saves for the backward are latch's results, handed to torch without a copy. The result is
AOTAutograd's autograd.Function: backward(), autograd.grad, accumulation into .grad,
retain_graph and two forwards before one backward behave as in eager.

Buffers the forward updates in place (batch norm's running statistics) come out of the
forward graph as extra outputs and are copied into the module's buffers after the call. A
half with an op latch does not lower runs as PyTorch's own aten graph, said once on stderr."""
import operator
import sys

import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree

from .. import _latch
from . import check as check_eager
from . import lowering_train  # noqa: F401 (registers the training lowerings)

try:
    import functorch.compile as _aot
    from functorch._src import aot_autograd as _aot_impl
except ImportError:  # functorch is part of Debian's torch 1.13; without it no autograd path
    _aot = _aot_impl = None

aten = torch.ops.aten


def available():
    return _aot is not None


def _decompositions():
    """The decompositions AOTAutograd applies: training-mode layers and backward ops into ops
    latch lowers."""
    from torch._decomp import get_decompositions
    wanted = [
        aten.native_batch_norm, aten.native_batch_norm_backward, aten.native_layer_norm_backward,
        aten.tanh_backward,
        aten.sigmoid_backward, aten.gelu_backward, aten.silu_backward, aten.hardtanh_backward,
        aten.leaky_relu_backward, aten.elu_backward, aten.softplus_backward, aten.mse_loss_backward,
        aten.select_backward, aten.slice_backward, aten.nll_loss2d_backward,
    ]
    return get_decompositions(wanted)


def _partition():
    """The min-cut partition (recomputes cheap ops in the backward rather than saving them)
    when its solver, networkx, is installed; else the default split at the forward's outputs.
    Max pool gradients are first made to read the pool's input rather than its indices
    (lowering_train.drop_pool_indices), so no indices are computed or saved."""
    try:
        import networkx  # noqa: F401
        split = _aot.min_cut_rematerialization_partition
    except ImportError:
        split = _aot.default_partition

    def partition(joint, joint_inputs, **kwargs):
        lowering_train.drop_pool_indices(joint)
        return split(joint, joint_inputs, **kwargs)
    return partition


class _TrainingBatchNorm(torch.overrides.TorchFunctionMode):
    """Training-mode batch norm as functional ops: the batch statistics without running
    statistics, then the running statistics updated by in-place arithmetic that
    functionalization turns into new values (native_batch_norm's own update in place is lost
    by torch 1.13's functionalization)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.batch_norm:
            return func(*args, **kwargs)
        bound = dict(zip(("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
                         args), **kwargs)
        x, mean, var = bound["input"], bound.get("running_mean"), bound.get("running_var")
        training, momentum = bound.get("training", False), bound.get("momentum", 0.1)
        if not training or mean is None or var is None:
            return func(*args, **kwargs)
        out = F.batch_norm(x, None, None, bound.get("weight"), bound.get("bias"), True, momentum,
                           bound.get("eps", 1e-5))
        with torch.no_grad():
            dims = [0] + list(range(2, x.dim()))
            n = x.numel() // x.shape[1]
            batch_var = x.var(dims, unbiased=False) * (n / max(n - 1, 1))
            mean.mul_(1 - momentum).add_(x.mean(dims) * momentum)
            var.mul_(1 - momentum).add_(batch_var * momentum)
        return out


class _GraphCall(_latch.Compiled):
    """One fx graph AOTAutograd handed over, run by latch: the warm call in C gives the list
    of torch outputs (via _pack); leaves that are not tensors (None gradients) are put back."""

    def __init__(self, function, leaves, tensor_leaves, graph, name, check, warned, precision=None):
        self.function, self.leaves, self.tensor_leaves = function, leaves, tensor_leaves
        self.precision = precision
        self.single = False
        self.graph, self.name, self.warned = graph, name, warned
        self.gm = graph if check else None  # checked against eager PyTorch at the first call
        self.eager = None  # the graph, run by PyTorch, once latch could not trace it
        self._boxed_call = True  # AOTAutograd calls it with the list of arguments

    def _pack(self, outs):
        return outs

    def _slow_call(self, args, kwargs):
        raise RuntimeError("latch: a compiled autograd graph was called without its Function")

    def _unsupported(self, exc, args):
        raise exc

    def run(self, args):
        if self.eager is not None:
            return list(self.eager(*args))
        args = [a if a.is_contiguous() else a.contiguous() for a in args]
        try:
            outs = _latch.Compiled.__call__(self, *args)
        except _latch.Unsupported as exc:  # a lowering refused these arguments at the trace
            _warn(self.warned, self.name, str(exc), "it runs in PyTorch")
            self.eager, self.function = self.graph, None
            return list(self.eager(*args))
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_leaves, outs):
            leaves[i] = t
        if self.gm is not None:
            gm, self.gm = self.gm, None
            check_eager.compare(self.name, gm, args, leaves, self.precision)
        return leaves


def _warn(warned, name, reason, action):
    """One line on stderr per reason (the op's name in it)."""
    if reason not in warned:
        warned.add(reason)
        print(f"latch: compile: {name}: {reason}; {action}", file=sys.stderr)


def _boxed(call, half):
    def run(args):
        if half == "backward" and torch.is_grad_enabled():
            raise RuntimeError("latch.torch.compile: a double backward (create_graph=True) through a compiled "
                               "function is not supported; compute higher derivatives eagerly")
        out = call.run(args)
        args.clear()  # AOTAutograd's boxed convention: the callee may free its inputs
        return out
    run._boxed_call = True
    return run


class _Compiler:
    """fw_compiler and bw_compiler for AOTAutograd: each fx graph to a latch Function."""

    def __init__(self, name, warned, check, functions, precision=None):
        self.name, self.warned, self.check, self.precision = name, warned, check, precision
        self.functions = functions  # every latch Function made, for Compiled.stats()

    def __call__(self, gm, example_inputs, half):
        from .compile import interpret, unlowered
        op = unlowered(gm)
        if op is not None:
            _warn(self.warned, f"{self.name}.{half}", f"aten op {op} is not lowered", "it runs in PyTorch")
            return _aot.make_boxed_func(gm)
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        leaves = pytree.tree_flatten(list(out_node.args[0]))[0]
        tensor_leaves = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node)]
        tensor_nodes = [leaves[i] for i in tensor_leaves]

        def trace(inputs, args):
            every = interpret(gm, inputs, {})
            outs = [every[i] for i in tensor_leaves]
            missing = next((node for node, o in zip(tensor_nodes, outs) if o is None), None)
            if missing is not None:  # an output the inference lowering leaves out (ceil_mode max pool's indices)
                op = missing.args[0].target if missing.target is operator.getitem else missing.target
                raise _latch.Unsupported(f"{op} gives no value latch can save for the backward")
            return outs

        # the graph random numbers' seed: torch's seed when the graph is made, so a seeded run
        # draws the same dropout masks every time and torch.manual_seed changes them
        seed = (torch.initial_seed() * 0x9E3779B97F4A7C15 + (1 if half == "forward" else 2)) % (1 << 64)
        function = _latch.Function(trace, len(tensor_leaves), name=f"{self.name}.{half}", shapes=1, seed=seed,
                                   precision=self.precision)
        self.functions.append(function)
        leaves = [None if isinstance(leaf, torch.fx.Node) else leaf for leaf in leaves]
        call = _GraphCall(function, leaves, tensor_leaves, gm, f"{self.name}.{half}", self.check, self.warned,
                          self.precision)
        return _boxed(call, half)


def _state_tensors(state):
    return [d[k] for d, k, _ in state]


class AutogradGraphs:
    """One guard state's autograd path: AOTAutograd's compiled function over (parameters and
    buffers, then the call's tensors), traced on the first call at each input signature."""

    def __init__(self, fn, module, state, name, check=False, precision=None):
        self.fn, self.module, self.state, self.name, self.check = fn, module, state, name, check
        self.precision = precision
        self.compiled = {}  # input signature -> (AOTAutograd's function, output spec, output count, mutated)
        self.warned = set()
        self.functions = []  # the latch Functions of every signature's forward and backward

    def _run(self, flat_args):
        """fn over flat_args (the state's tensors, then the call's), batch norm made functional."""
        n_state = len(self.state)
        with _TrainingBatchNorm():
            if self.module is not None:
                names = [full for _, _, full in self.state]
                return torch.nn.utils.stateless.functional_call(self.module, dict(zip(names, flat_args[:n_state])),
                                                               tuple(flat_args[n_state:]))
            return self.fn(*flat_args[n_state:])

    def _mutated(self, flat_args):
        """The flat indices the function updates in place: one eager run on copies."""
        copies = [a.detach().clone() for a in flat_args]
        versions = [c._version for c in copies]
        with torch.no_grad():
            self._run(copies)
        return [i for i, c in enumerate(copies) if c._version != versions[i]]

    def _compile(self, flat_args):
        mutated = self._mutated(flat_args)
        box = []

        def flat(*flat_args):
            outs, spec = pytree.tree_flatten(self._run(flat_args))
            box[:] = [spec, len(outs)]
            return tuple(outs) + tuple(flat_args[i] for i in mutated)

        compiler = _Compiler(self.name, self.warned, self.check, self.functions, self.precision)
        config = _aot_impl.AOTConfig(fw_compiler=lambda gm, ins: compiler(gm, ins, "forward"),
                                     bw_compiler=lambda gm, ins: compiler(gm, ins, "backward"),
                                     partition_fn=_partition(), decompositions=_decompositions())
        # traced on copies of what it updates: AOTAutograd runs the function eagerly while
        # tracing, and an in-place update (running statistics) must reach the module once
        copies = [a.detach().clone().requires_grad_(a.requires_grad) if i in mutated else a
                  for i, a in enumerate(flat_args)]
        compiled = _aot_impl.create_aot_dispatcher_function(flat, copies, config)
        return compiled, box[0], box[1], mutated

    def call(self, args):
        flat_args = _state_tensors(self.state) + list(args)
        key = tuple((tuple(a.shape), a.dtype, a.requires_grad) for a in flat_args)
        entry = self.compiled.get(key)
        if entry is None:
            entry = self.compiled[key] = self._compile(flat_args)
        compiled, spec, n_out, mutated = entry
        outs = compiled(flat_args)
        if mutated:
            with torch.no_grad():
                for i, new in zip(mutated, outs[n_out:]):
                    flat_args[i].copy_(new)
        return pytree.tree_unflatten(list(outs[:n_out]), spec)
