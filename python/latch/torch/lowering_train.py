"""aten ops that training graphs need, as latch ops: what AOTAutograd's forward and backward
graphs hold after torch._decomp's decompositions (latch/torch/autograd.py) that lowering.py
does not lower for inference.

  pow.Scalar                    a number to a tensor's power (Adam's bias corrections)
  addcmul, addcdiv              the optimizers' moment and parameter updates
  var.correction                the batch statistics of training-mode batch norm
  max_pool2d_with_indices       the flat h * W + w index of each window's maximum (the first
                                one in row-major order on ties, as PyTorch's CPU kernel)
  max_pool2d_with_indices_backward
                                each gradient to its window's first maximum: one
                                select-and-scatter over the pool's input (latch_max_pool2d_grad),
                                the indices not read; in a joint graph it reads the input
                                instead of them (drop_pool_indices), so the forward makes none
  embedding_dense_backward, index_put (accumulate, one index on dim 0)
                                a scatter-add as a one-hot matrix product
  native_dropout                latch's graph random numbers: the mask and the scaled values
  bernoulli_, bernoulli, div_   the same numbers: dropout's mask outside autograd, scaled
  new_empty_strided             the buffer lazy mode's backward accumulates into"""
import operator

import torch

from .. import _latch
from . import dtypes as D
from .lowering import (LOWERINGS, lowers, _install, _binary, _in_place, operands, max_pool2d, values, norm_dim, reshape, _pair, const,
                       Unsupported, SUM, MEAN, SUB, MUL, DIV, ADD, EQ, GE, NE, LT, AND, NOT, POW)

aten = torch.ops.aten
L = _latch


def _dims(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    return [norm_dim(d, rank) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]


lowers(aten.pow.Scalar)(_binary(POW))  # Adam's bias corrections: beta ** step, the step a tensor


def _addc(op):
    """self + value * (a op b): aten's addcmul and addcdiv (the optimizers' moment updates)."""
    def lower(x, a, b, value=1):
        t = L.binary(op, *operands(a, b))
        if value != 1:
            t = L.binary(MUL, t, const(value, t.dtype))
        return L.binary(ADD, *operands(x, t))
    return lower


lowers(aten.addcmul.default)(_addc(MUL))
lowers(aten.addcdiv.default)(_addc(DIV))


@lowers(aten.var.correction)
def var_correction(x, dim=None, correction=None, keepdim=False):
    dims = _dims(dim, x.rank)
    v = values(x)
    n = 1
    for d in dims:
        n *= v[d]
    correction = 1 if correction is None else correction
    centered = L.binary(SUB, x, L.reduce(MEAN, x, dims, True))
    total = L.reduce(SUM, L.binary(MUL, centered, centered), dims, keepdim)
    return L.binary(DIV, total, const(max(n - correction, 0), x.dtype))


# ---- max pooling with indices, and its backward ----

def _offsets(kernel):
    return [(dy, dx) for dy in range(kernel[0]) for dx in range(kernel[1])]


def _window_element(xp, dy, dx, stride, out):
    """The element at offset (dy, dx) of every window of the padded input xp: [N, C, oh, ow]."""
    rows = L.slice(xp, 2, dy, dy + (out[0] - 1) * stride[0] + 1, stride[0])
    return L.slice(rows, 3, dx, dx + (out[1] - 1) * stride[1] + 1, stride[1])


def _flat_position(dy, dx, stride, padding, out, width):
    """h * W + w of offset (dy, dx) of each window, as an [oh, ow] int64 tensor."""
    oh = L.iota(D.I64, [out[0], 1], 0)
    ow = L.iota(D.I64, [1, out[1]], 1)
    h = L.binary(ADD, L.binary(MUL, oh, const(stride[0], D.I64)), const(dy - padding[0], D.I64))
    w = L.binary(ADD, L.binary(MUL, ow, const(stride[1], D.I64)), const(dx - padding[1], D.I64))
    return L.binary(ADD, L.binary(MUL, h, const(width, D.I64)), w)


def _pool_args(x, kernel, stride, padding, dilation, ceil_mode):
    kernel, stride, padding = _pair(kernel), _pair(stride, _pair(kernel)), _pair(padding)
    if any(d != 1 for d in _pair(dilation)) or ceil_mode:
        raise Unsupported("aten.max_pool2d_with_indices with dilation or ceil_mode in training")
    h, w = x.dim(2), x.dim(3)
    out = [(h + 2 * padding[0] - kernel[0]) // stride[0] + 1, (w + 2 * padding[1] - kernel[1]) // stride[1] + 1]
    return kernel, stride, padding, out


@lowers(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    if ceil_mode:  # the values only (inference's lowering): a backward through them is refused
        return max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    kernel, stride, padding, out = _pool_args(x, kernel, stride, padding, dilation, ceil_mode)
    best = L.pool2d(False, x, kernel, stride, padding)
    xp = L.pad(x, [0, 0, padding[0], padding[1]], [0, 0, padding[0], padding[1]], float("-inf"))
    index, found = None, None
    for dy, dx in _offsets(kernel):
        hit = L.compare(EQ, _window_element(xp, dy, dx, stride, out), best)
        if found is not None:
            hit = L.binary(AND, hit, L.unary(NOT, found))
        pos = _flat_position(dy, dx, stride, padding, out, x.dim(3))
        index = pos if index is None else L.where(hit, pos, index)
        found = hit if found is None else _or(found, hit)
    n, c = x.dim(0), x.dim(1)
    return best, L.broadcast_to(index, [n, c, out[0], out[1]]) if index.rank < 4 else index


def _or(a, b):
    return L.unary(NOT, L.binary(AND, L.unary(NOT, a), L.unary(NOT, b)))


def _pool_backward_in_pytorch(grad, x, kernel, stride, padding, dilation, ceil_mode):
    indices = aten.max_pool2d_with_indices.default(x, kernel, stride, padding, dilation, ceil_mode)[1]
    return aten.max_pool2d_with_indices_backward.default(grad, x, kernel, stride, padding, dilation, ceil_mode,
                                                         indices)


# latch::max_pool2d_backward_from_input: aten.max_pool2d_with_indices_backward without the
# indices, which a joint graph's max pool gradient reads from max_pool2d_with_indices over the
# same x (drop_pool_indices). An op of its own so that fx graphs, the eager check and a graph
# run in PyTorch take it as any aten op: in PyTorch it finds the indices again.
_library = torch.library.Library("latch", "DEF")
_library.define("max_pool2d_backward_from_input(Tensor grad, Tensor x, int[] kernel, int[] stride, int[] padding, "
                "int[] dilation, bool ceil_mode) -> Tensor")
_library.impl("max_pool2d_backward_from_input", _pool_backward_in_pytorch, "CPU")
max_pool2d_backward_from_input = torch.ops.latch.max_pool2d_backward_from_input.default


def drop_pool_indices(joint):
    """Makes each max pool gradient of AOTAutograd's joint graph read the pool's input instead
    of its indices (max_pool2d_backward_from_input), so the forward graph neither computes nor
    saves them. Returns how many it changed."""
    changed = 0
    for node in joint.graph.nodes:
        if node.op != "call_function" or node.target is not aten.max_pool2d_with_indices_backward.default or \
                len(node.args) != 8:
            continue
        grad, x, kernel, stride, padding, dilation, ceil_mode, indices = node.args
        pool = indices.args[0] if isinstance(indices, torch.fx.Node) and indices.target is operator.getitem and \
            indices.args[1] == 1 else None
        if pool is None or pool.target is not aten.max_pool2d_with_indices.default or pool.args[0] is not x or \
                ceil_mode or any(d != 1 for d in _pair(dilation)):  # those latch leaves to PyTorch
            continue
        node.target = max_pool2d_backward_from_input
        node.args = (grad, x, kernel, stride, padding, dilation, ceil_mode)
        changed += 1
    if changed:
        joint.graph.eliminate_dead_code()
        joint.recompile()
    return changed


def _max_pool_grad(grad, x, kernel, stride, padding, dilation, ceil_mode, indices=None):
    """Each gradient to its window's first maximum of x in row-major order (the element the
    forward's indices name, as PyTorch's CPU kernel picks it): one select-and-scatter, which
    finds the maxima again rather than reading indices."""
    kernel, stride, padding, out = _pool_args(x, kernel, stride, padding, dilation, ceil_mode)
    return L.max_pool2d_grad(x, grad, kernel, stride, padding)


LOWERINGS[aten.max_pool2d_with_indices_backward.default] = _max_pool_grad
LOWERINGS[max_pool2d_backward_from_input] = _max_pool_grad


# ---- scatter-add as a one-hot product ----

def _scatter_rows(rows, index, values_2d, dtype):
    """out[r] = sum of values_2d[i] over i with index[i] == r, for r < rows: onehot^T @ values."""
    onehot = L.compare(EQ, L.iota(D.I64, [rows, 1], 0), reshape(L.cast(index, D.I64), [1, -1]))
    return L.matmul(L.cast(onehot, dtype), values_2d)


@lowers(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise Unsupported("aten.embedding_dense_backward with scale_grad_by_freq")
    width = grad.dim(grad.rank - 1)
    flat_grad = reshape(grad, [-1, width])
    flat_index = reshape(indices, [-1])
    if padding_idx is not None and padding_idx >= 0:
        keep = L.compare(NE, flat_index, const(padding_idx, flat_index.dtype))
        flat_grad = L.where(reshape(keep, [-1, 1]), flat_grad, L.full(grad.dtype, [], 0.0))
    return _scatter_rows(num_weights, flat_index, flat_grad, grad.dtype)


@lowers(aten.index_put.default)
def index_put(x, indices, values_, accumulate=False):
    if not accumulate or len(indices) != 1 or indices[0] is None or indices[0].rank != 1 or \
            indices[0].dtype == D.BOOL:
        raise Unsupported("aten.index_put (only an accumulating one-index scatter-add on dim 0)")
    v = values(x)
    rest = 1
    for s in v[1:]:
        rest *= s
    added = _scatter_rows(v[0], indices[0], reshape(L.broadcast_to(values_, [indices[0].dim(0)] + v[1:])
                                                   if values_.rank != x.rank else values_, [-1, rest]), x.dtype)
    return L.binary(ADD, x, reshape(added, v))


# ---- dropout from latch's graph random numbers ----

@lowers(aten.native_dropout.default)
def native_dropout(x, p, train):
    if not train or not p:
        return x, L.full(D.BOOL, values(x), 1.0)
    if p >= 1:
        return L.binary(MUL, x, const(0.0, x.dtype)), L.full(D.BOOL, values(x), 0.0)
    keep = L.compare(GE, L.rand_uniform_like(x, 0.0, 1.0), const(p, x.dtype))
    scaled = L.binary(MUL, x, const(1.0 / (1.0 - p), x.dtype))
    return L.where(keep, scaled, L.full(x.dtype, [], 0.0)), keep


def _draws(x, p):
    """1 where a uniform draw from latch's graph random numbers is below p (a number or a
    tensor of probabilities), else 0, in x's dtype and shape."""
    u = L.rand_uniform_like(x, 0.0, 1.0)
    below = L.compare(LT, *operands(u, p if not isinstance(p, L.Tensor) else L.cast(p, u.dtype)))
    return L.cast(below, x.dtype)


@lowers(aten.bernoulli_.float)
def bernoulli_(x, p=0.5, generator=None):
    """Dropout's mask outside autograd (torch's dropout fills an empty tensor in place)."""
    L.assign(x, _draws(x, p))
    return x


@lowers(aten.bernoulli.p)
def bernoulli_p(x, p=0.5, generator=None):
    return _draws(x, p)


@lowers(aten.bernoulli.default)
def bernoulli(x, generator=None):
    return _draws(x, x)


LOWERINGS[aten.div_.Scalar] = _in_place(LOWERINGS[aten.div.Scalar])  # the mask scaled in place (lazy mode)


@lowers(aten.native_dropout_backward.default)
def native_dropout_backward(grad, mask, scale):
    return L.where(L.cast(mask, D.BOOL) if mask.dtype != D.BOOL else mask,
                   L.binary(MUL, grad, const(scale, grad.dtype)), L.full(grad.dtype, [], 0.0))



@lowers(aten.new_empty_strided.default)
def new_empty_strided(x, size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    """Memory autograd fills before reading (a gradient buffer): zeros, laid out contiguously."""
    return L.full(D.latch_dtype(dtype) if dtype is not None else x.dtype, list(size), 0.0)


_install()  # the extension's table again, with these
