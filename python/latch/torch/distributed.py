"""latch.torch.distributed: data-parallel training across the ranks mpirun starts, with the
gradients averaged inside latch's graph (docs/distributed.md):

  import latch.torch.distributed as dist
  rank, size = dist.init()                  # the world from mpirun's environment
  step = dist.DataParallel(model, loss_fn)  # model's parameters and buffers: rank 0's
  loss = step(x, y)                         # this rank's batch; .grad: the world's mean
  optimizer.step()

A step is one latch graph: the forward, the backward and the gradients' all-reduce. The joint
forward and backward of loss_fn(model, *batch) is traced by make_fx (torch.autograd.grad under
it, torch._decomp's decompositions for the backward ops, as the autograd path uses), each
node lowered to latch; the gradients are then cut into buckets of about bucket_cap_mb (in
reverse parameter order, as DDP fills them while the backward runs), each bucket flattened,
concatenated, averaged over the ranks by one all-reduce and cut back. The optimizer is
PyTorch's, run after the step on the averaged .grad, so every rank takes the same step.

Buffers follow DDP's default (broadcast_buffers=True): at the start of each step every rank
takes rank 0's buffers (rank 0 passes its own, the others zeros, and one all-reduce per bucket
sums them, inside the step's graph); the forward then updates this rank's copy from its own
batch (training-mode batch norm: its batch statistics normalize, its running statistics move
towards them), and the new values are copied into the module's buffers after the call.

Each rank runs the same graphs in the same order (their all-reduces meet through MPI), so
the batch's shapes must be the same on every rank. A forward that writes into a parameter or
buffer in place other than through batch norm is refused."""
import atexit
import os

import torch
from torch.utils import _pytree as pytree

from .. import _latch
from . import autograd

SUM, MEAN = 0, 1  # latch_reduce_op


def _environment_world():
    """(rank, size) as mpirun's environment says (Open MPI's variables, or the PMI ones of
    other launchers), or None outside mpirun."""
    for rank, size in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")):
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return None


_registered = []


def init():
    """Joins the world of ranks mpirun started: latch's runtime opens with LATCH_MPI=1 (latch
    initialises MPI, or uses the program's if it already did, e.g. mpi4py). Returns (rank,
    size); outside mpirun, (0, 1) and no MPI. It must come before the first latch call of the
    process, since the runtime reads its settings once when it opens."""
    expected = _environment_world()
    if expected is not None and expected[1] > 1 and not _latch.runtime_open():
        os.environ["LATCH_MPI"] = "1"
    got = _latch.world()
    if got[1] > 1 and not _registered:
        _registered.append(atexit.register(_latch.leave_world))  # MPI_Finalize before the interpreter ends
    if expected is not None and got != expected:
        raise RuntimeError(f"latch.torch.distributed.init: mpirun says rank {expected[0]} of {expected[1]}, latch's "
                           f"runtime has rank {got[0]} of {got[1]}: the runtime opened before init() without "
                           "LATCH_MPI=1; call init() first")
    return got


def world():
    """(rank, size) of latch's runtime: (0, 1) without a world."""
    return _latch.world()


def _buckets(tensors, cap_bytes):
    """Indices of tensors cut into consecutive groups of at most cap_bytes each (a tensor larger
    than the cap is a group alone), from the last tensor to the first: the order the backward
    produces the gradients in, as DDP fills its buckets."""
    groups, current, size = [], [], 0
    for i in reversed(range(len(tensors))):
        nbytes = tensors[i].numel() * tensors[i].element_size()
        if current and (size + nbytes > cap_bytes or tensors[i].dtype != tensors[current[0]].dtype):
            groups.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes
    if current:
        groups.append(current)
    return groups


def _over_ranks(grads, groups, op=MEAN):
    """grads (latch Tensors) reduced over the ranks (op: MEAN or SUM), one all-reduce per group."""
    out = list(grads)
    for group in groups:
        flat = [_latch.reshape(grads[i], [-1]) for i in group]
        fused = _latch.all_reduce(op, flat[0] if len(flat) == 1 else _latch.concat(flat, 0))
        at = 0
        for i, f in zip(group, flat):
            n = f.shape[0]
            piece = _latch.slice(fused, 0, at, at + n, 1) if len(flat) > 1 else fused
            out[i] = _latch.reshape(piece, list(grads[i].shape))
            at += n
    return out


class _StepCall(_latch.Compiled):
    """The step's latch Function, called through the C warm call: a list of torch tensors."""

    def __init__(self, function):
        self.function, self.single = function, False

    def _pack(self, outs):
        return outs

    def _slow_call(self, args, kwargs):
        raise RuntimeError("latch.torch.distributed: the step's graph was called without its Function")

    def _unsupported(self, exc, args):
        raise exc


class DataParallel:
    """A compiled data-parallel training step of module under loss_fn(module, *batch) -> a
    scalar loss (see the module's comment). At construction every rank takes rank 0's
    parameters and buffers; each call starts from rank 0's buffers, runs this rank's batch,
    leaves the world's mean gradient in each parameter's .grad (replacing it), this rank's
    updated buffers in the module, and returns this rank's loss."""

    def __init__(self, module, loss_fn, bucket_cap_mb=25):
        self.module, self.loss_fn = module, loss_fn
        self.bucket_cap = int(bucket_cap_mb * 1024 * 1024)
        self.rank, self.size = world()
        self.params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.buffers = list(module.named_buffers())
        self.others = [(n, t) for n, t in module.named_parameters() if not t.requires_grad] + self.buffers
        # the buffers every step takes from rank 0 (bool ones, which a sum cannot carry, stay)
        first = len(self.params) + len(self.others) - len(self.buffers)
        self.synced = [first + i for i, (_, b) in enumerate(self.buffers) if b.dtype != torch.bool] \
            if self.size > 1 else []
        self.zeros = {i: None for i in self.synced}  # the non-root ranks' stand-ins, made once
        self.steps = {}  # the batch's signature -> _StepCall
        self.broadcast()

    def broadcast(self):
        """Every rank's parameters and buffers become rank 0's: one all-reduce per bucket of
        rank 0's values and the other ranks' zeros (a sum exact in every type)."""
        tensors = [t for _, t in self.params + self.others if t.is_floating_point() or t.dtype != torch.bool]
        if self.size == 1 or not tensors:
            return
        flat = [_latch.from_torch(t.detach().contiguous() if self.rank == 0 else torch.zeros_like(t))
                for t in tensors]
        summed = []
        for group in _buckets(tensors, self.bucket_cap):
            parts = [_latch.reshape(flat[i], [-1]) for i in group]
            fused = _latch.all_reduce(SUM, parts[0] if len(parts) == 1 else _latch.concat(parts, 0))
            summed.append((group, _latch.to_torch(fused)))
        with torch.no_grad():
            for group, values in summed:
                at = 0
                for i in group:
                    n = tensors[i].numel()
                    tensors[i].copy_(values[at:at + n].view_as(tensors[i]))
                    at += n

    def _trace(self, batch):
        """The joint forward and backward as an fx graph over (parameters, others, batch) to
        (loss, gradients, buffers after the forward). The forward runs on copies of the
        buffers, so its updates (batch norm's, made functional arithmetic by
        autograd._TrainingBatchNorm) are graph values rather than writes into the inputs."""
        from functorch import make_fx
        from torch.nn.utils.stateless import _reparametrize_module
        names = [n for n, _ in self.params] + [n for n, _ in self.others]
        buffer_names = [n for n, _ in self.buffers]
        n_params = len(self.params)

        def joint(*flat):
            values = dict(zip(names, flat[:len(names)]))
            for n in buffer_names:
                values[n] = values[n].clone()
            with _reparametrize_module(self.module, values), autograd._TrainingBatchNorm():
                loss = self.loss_fn(self.module, *flat[len(names):])
            grads = torch.autograd.grad(loss, flat[:n_params], allow_unused=True)
            return [loss.detach()] + [torch.zeros_like(p) if g is None else g for p, g in zip(flat, grads)] + \
                [values[n].detach() for n in buffer_names]

        example = [p.detach().requires_grad_(True) for _, p in self.params] + [t.detach() for _, t in self.others]
        gm = make_fx(joint, decomposition_table=autograd._decompositions())(*example, *batch)
        placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
        for node in gm.graph.nodes:
            packet = getattr(node.target, "overloadpacket", None)
            if packet is not None and packet.__name__.endswith("_") and node.args and node.args[0] in placeholders:
                raise _latch.Unsupported(f"latch.torch.distributed: the module updates {node.args[0].name} in place "
                                         f"({node.target}); a forward may update buffers, not its parameters or inputs")
        return gm

    def _compile(self, batch):
        from .compile import interpret, unlowered
        gm = self._trace(batch)
        op = unlowered(gm)
        if op is not None:
            raise _latch.Unsupported(f"latch.torch.distributed: aten op {op} is not lowered")
        groups = _buckets([p for _, p in self.params], self.bucket_cap)
        n_params, synced = len(self.params), self.synced
        buffer_groups = _buckets([self._flat_state()[i] for i in synced], self.bucket_cap)

        def trace(inputs, args):
            inputs = list(inputs)
            for i, value in zip(synced, _over_ranks([inputs[i] for i in synced], buffer_groups, SUM)):
                inputs[i] = value  # rank 0's buffers: its values plus the others' zeros
            outs = interpret(gm, inputs, {})
            return [outs[0]] + _over_ranks(outs[1:1 + n_params], groups) + outs[1 + n_params:]

        function = _latch.Function(trace, 1 + n_params + len(self.buffers), name="distributed.step", shapes=1)
        return _StepCall(function)

    def _flat_state(self):
        return [p.detach() for _, p in self.params] + [t.detach() for _, t in self.others]

    def __call__(self, *batch):
        batch = [b.contiguous() if isinstance(b, torch.Tensor) else b for b in batch]
        key = tuple((tuple(b.shape), b.dtype) if isinstance(b, torch.Tensor) else b for b in pytree.tree_flatten(batch)[0])
        step = self.steps.get(key)
        if step is None:
            step = self.steps[key] = self._compile(batch)
        flat = self._flat_state()
        if self.rank != 0:
            for i in self.synced:  # rank 0's buffers arrive through the step's all-reduce
                if self.zeros[i] is None or self.zeros[i].shape != flat[i].shape:
                    self.zeros[i] = torch.zeros_like(flat[i])
                flat[i] = self.zeros[i]
        outs = _latch.Compiled.__call__(step, *flat, *batch)
        n_params = len(self.params)
        for (_, p), g in zip(self.params, outs[1:1 + n_params]):
            p.grad = g
        with torch.no_grad():
            for (_, b), new in zip(self.buffers, outs[1 + n_params:]):
                b.copy_(new)
        return outs[0]
