"""aten ops as latch ops: one function per aten overload, over latch Tensors (latch._latch),
shared by latch.torch.compile (which walks a make_fx graph) and latch.torch.lazy (which
sees each op in __torch_dispatch__). Composite ops go to latch's composites (gelu, softmax,
log_softmax, layer_norm, batch_norm). An overload missing from LOWERINGS, or one used in a
way latch cannot do (a transposed convolution, a pooling with dilation), raises Unsupported
naming the op, and the caller runs it eagerly.

Sizes: inside a traced function a dim may be symbolic. Reading Tensor.shape pins every dim
and Tensor.dim(i) the one read (a guard each); size_of(i) reads without pinning. Reshapes
keep one symbolic group free by writing -1 for it (see reshape)."""
import math

import torch

from .. import _latch
from . import dtypes as D

aten = torch.ops.aten
L = _latch
Unsupported = _latch.Unsupported

NEG, ABS, SIGN, FLOOR, CEIL, ROUND, NOT, EXP, LOG, SQRT, RSQRT, TANH, SIGMOID, SIN, COS, ERF, LOG1P, EXPM1 = range(18)
ADD, SUB, MUL, DIV, REM, POW, MAX, MIN, AND, OR, XOR = range(11)
EQ, NE, LT, LE, GT, GE = range(6)
SUM, MEAN, RMAX, RMIN = range(4)

LOWERINGS = {}


def lowers(*overloads):
    def register(fn):
        for o in overloads:
            LOWERINGS[o] = fn
        return fn
    return register


def is_tensor(x):
    return isinstance(x, L.Tensor)


# ---- scalars and constants ----

def scalar_dtype(value, like):
    """The dtype of a Python scalar combined with a tensor of dtype like (torch's rule)."""
    if isinstance(value, bool):
        return like
    if isinstance(value, int):
        return like if like != D.BOOL else D.I64
    return like if like in D.FLOATS else D.F32


def const(value, like_dtype):
    return L.full(scalar_dtype(value, like_dtype), [], float(value))


def _category(dtype):
    return 0 if dtype == D.BOOL else 2 if dtype in D.FLOATS else 1


def operands(a, b):
    """Two operands of a binary op as tensors: a Python scalar takes the other's dtype, and so
    does a 0-dim tensor beside a dimensioned one of its category or a higher one (torch's
    promotion: dimensioned tensors decide within a category)."""
    if not is_tensor(a):
        a = const(a, b.dtype)
    if not is_tensor(b):
        b = const(b, a.dtype)
    if a.dtype != b.dtype and (a.rank == 0) != (b.rank == 0):
        zero, other = (a, b) if a.rank == 0 else (b, a)
        if _category(zero.dtype) <= _category(other.dtype):
            zero = L.cast(zero, other.dtype)
            a, b = (zero, other) if a.rank == 0 else (other, zero)
    return a, b


def norm_dim(dim, rank):
    return dim + rank if dim < 0 else dim


def values(x):
    """The dims' current values without pinning them."""
    return [x.size_of(i)[0] for i in range(x.rank)]


def symbolic_dims(x):
    return [i for i in range(x.rank) if x.size_of(i)[1] >= 0]


# ---- reshapes that keep a symbolic batch ----

def _segments(src, dst):
    """Groups of consecutive source and target dims with equal products: [(src idx, dst idx)]."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        si, dj, ps, pd = [], [], 1, 1
        while True:
            if ps == pd and (si or dj) and not (i < len(src) and src[i] == 1 and pd == ps and dj) \
                    and not (j < len(dst) and dst[j] == 1):
                break
            if (ps <= pd or j >= len(dst)) and i < len(src):
                ps *= src[i]; si.append(i); i += 1
            elif j < len(dst):
                pd *= dst[j]; dj.append(j); j += 1
            else:
                break
        groups.append((si, dj))
    return groups


def reshape(x, target):
    """latch reshape to target (ints; one may be -1). When x has symbolic dims in one group of
    dims the reshape regroups, that group's first target dim becomes -1, so the batch stays
    symbolic; otherwise the dims are pinned."""
    src = values(x)
    target = list(target)
    numel = math.prod(src)
    if -1 in target:
        rest = math.prod(t for t in target if t != -1)
        target[target.index(-1)] = numel // rest if rest else 0
    syms = symbolic_dims(x)
    if not syms:
        return L.reshape(x, target)
    if src == target:
        return x
    groups = [g for g in _segments(src, target) if any(i in syms for i in g[0])]
    if len(groups) == 1 and groups[0][1]:
        free = next((j for j in groups[0][1] if target[j] != 1), groups[0][1][0])
        target[free] = -1
        return L.reshape(x, target)
    x.shape  # several groups: pin the dims (a guard) and reshape statically
    return L.reshape(x, target)


# ---- elementwise ----

def _unary(op):
    return lambda x: L.unary(op, x)


for _op, _overloads in [(NEG, [aten.neg.default]), (ABS, [aten.abs.default]), (EXP, [aten.exp.default]),
                        (LOG, [aten.log.default]), (SQRT, [aten.sqrt.default]), (RSQRT, [aten.rsqrt.default]),
                        (TANH, [aten.tanh.default]), (SIGMOID, [aten.sigmoid.default]), (SIN, [aten.sin.default]),
                        (COS, [aten.cos.default]), (ERF, [aten.erf.default]), (FLOOR, [aten.floor.default]),
                        (CEIL, [aten.ceil.default]), (SIGN, [aten.sign.default]), (LOG1P, [aten.log1p.default]),
                        (EXPM1, [aten.expm1.default]), (NOT, [aten.bitwise_not.default, aten.logical_not.default])]:
    lowers(*_overloads)(_unary(_op))


def _binary(op):
    def lower(a, b):
        return L.binary(op, *operands(a, b))
    return lower


lowers(aten.mul.Tensor, aten.mul.Scalar)(_binary(MUL))
lowers(aten.maximum.default)(_binary(MAX))
lowers(aten.minimum.default)(_binary(MIN))
lowers(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)(_binary(POW))
lowers(aten.remainder.Tensor, aten.remainder.Scalar)(_binary(REM))
lowers(aten.bitwise_and.Tensor, aten.logical_and.default)(_binary(AND))
lowers(aten.bitwise_or.Tensor, aten.logical_or.default)(_binary(OR))


def _scaled_binary(op):
    """a op (alpha * b): aten's add and sub."""
    def lower(a, b, alpha=1):
        a, b = operands(a, b)
        if alpha != 1:
            b = L.binary(MUL, b, const(alpha, b.dtype))
        return L.binary(op, a, b)
    return lower


lowers(aten.add.Tensor, aten.add.Scalar)(_scaled_binary(ADD))
sub = lowers(aten.sub.Tensor, aten.sub.Scalar)(_scaled_binary(SUB))


@lowers(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(a, b, alpha=1):
    return sub(b, a, alpha)


@lowers(aten.div.Tensor, aten.div.Scalar)
def div(a, b):
    a, b = operands(a, b)
    if a.dtype not in D.FLOATS and b.dtype not in D.FLOATS:  # true division
        a = L.cast(a, D.F32)
    return L.binary(DIV, a, b)


def _compare(op):
    def lower(a, b):
        return L.compare(op, *operands(a, b))
    return lower


for _op, _name in [(EQ, "eq"), (NE, "ne"), (LT, "lt"), (LE, "le"), (GT, "gt"), (GE, "ge")]:
    lowers(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(_compare(_op))


@lowers(aten.where.self)
def where(cond, a, b):
    a, b = operands(a, b)
    return L.where(cond, a, b)


@lowers(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x, mask, value):
    v = value if is_tensor(value) else const(value, x.dtype)
    return L.where(mask, L.cast(v, x.dtype), x)


@lowers(aten.relu.default)
def relu(x):
    return L.relu(x)


@lowers(aten.clamp.default)
def clamp(x, low=None, high=None):
    return L.clamp(x, -math.inf if low is None else low, math.inf if high is None else high)


@lowers(aten.hardtanh.default)
def hardtanh(x, low=-1, high=1):
    return L.clamp(x, low, high)


@lowers(aten.gelu.default)
def gelu(x, approximate="none"):
    return L.gelu(x, approximate == "tanh")


@lowers(aten.silu.default)
def silu(x):
    return L.binary(MUL, x, L.unary(SIGMOID, x))


@lowers(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    return L.where(L.compare(GT, x, const(threshold, x.dtype)), grad, const(0, grad.dtype))


# ---- copies, casts and creation ----

@lowers(aten.clone.default, aten.detach.default, aten.alias.default, aten.lift_fresh_copy.default,
        aten.lift_fresh.default, aten.contiguous.default)
def identity(x, **kwargs):
    return L.cast(x, x.dtype)  # a new handle: an in-place update of the copy leaves x alone


@lowers(aten._to_copy.default)
def to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    if device is not None and torch.device(device).type not in ("cpu", "lazy"):
        raise Unsupported(f"aten._to_copy to device {device}")
    return L.cast(x, D.latch_dtype(dtype) if dtype is not None else x.dtype)


def _full(size, value, dtype, default=D.F32):
    d = D.latch_dtype(dtype) if dtype is not None else default
    return L.full(d, list(size), float(value))


@lowers(aten.zeros.default, aten.empty.memory_format, aten.new_empty.default)
def zeros(*args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    like = args[0] if is_tensor(args[0]) else None
    return _full(args[-1], 0, dtype, like.dtype if like else D.F32)


@lowers(aten.new_zeros.default)
def new_zeros(x, size, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, 0, dtype, x.dtype)


@lowers(aten.new_ones.default)
def new_ones(x, size, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, 1, dtype, x.dtype)


@lowers(aten.ones.default)
def ones(size, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, 1, dtype)


@lowers(aten.full.default)
def full(size, value, dtype=None, layout=None, device=None, pin_memory=None):
    default = D.F32 if isinstance(value, float) else D.BOOL if isinstance(value, bool) else D.I64
    return _full(size, value, dtype, default)


def _like(value):
    def lower(x, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return _full(x.shape, value, dtype, x.dtype)
    return lower


lowers(aten.zeros_like.default, aten.empty_like.default)(_like(0))
lowers(aten.ones_like.default)(_like(1))


@lowers(aten.full_like.default)
def full_like(x, value, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _full(x.shape, value, dtype, x.dtype)


@lowers(aten.scalar_tensor.default)
def scalar_tensor(value, dtype=None, layout=None, device=None, pin_memory=None):
    return _full([], value, dtype)


@lowers(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    count = max(0, math.ceil((end - start) / step))
    is_float = any(isinstance(v, float) for v in (start, end, step))
    d = D.latch_dtype(dtype) if dtype is not None else (D.F32 if is_float else D.I64)
    x = L.iota(d if d != D.BOOL else D.I64, [count], 0)
    if step != 1:
        x = L.binary(MUL, x, const(step, d))
    if start != 0:
        x = L.binary(ADD, x, const(start, d))
    return x


def _triangle(lower_part):
    def lower(x, diagonal=0):
        rows, cols = x.dim(-2), x.dim(-1)
        r = L.iota(D.I64, [rows, cols], 0)
        c = L.iota(D.I64, [rows, cols], 1)
        keep = L.compare(LE if lower_part else GE, L.binary(SUB, c, r), L.full(D.I64, [], float(diagonal)))
        return L.where(keep, x, L.full(x.dtype, [], 0.0))
    return lower


lowers(aten.tril.default)(_triangle(True))
lowers(aten.triu.default)(_triangle(False))


# ---- matrix products and convolutions ----

@lowers(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(a, b):
    return L.matmul(a, b)


@lowers(aten.addmm.default)
def addmm(bias, a, b, beta=1, alpha=1):
    product = L.matmul(a, b)
    if alpha != 1:
        product = L.binary(MUL, product, const(alpha, product.dtype))
    if beta != 1:
        bias = L.binary(MUL, bias, const(beta, bias.dtype))
    return L.binary(ADD, product, bias)


@lowers(aten.linear.default)
def linear(x, w, b=None):
    y = L.matmul(x, L.permute(w, [1, 0]))
    return y if b is None else L.binary(ADD, y, b)


@lowers(aten.convolution.default)
def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed or x.rank != 4:
        raise Unsupported(f"aten.convolution ({'transposed' if transposed else f'{x.rank - 2}-d'}): latch has 2-d convolutions only")
    y = L.conv2d(x, w, stride, padding, dilation, groups)
    if bias is not None:  # [C, 1, 1]: the backend's conv bias (see python/src/dispatch.c fast_conv)
        y = L.binary(ADD, y, L.reshape(bias, [-1, 1, 1]))
    return y


@lowers(aten.convolution_backward.default)
def convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                         output_mask):
    if transposed or groups != 1 or x.rank != 4:
        raise Unsupported("aten.convolution_backward (transposed or grouped)")
    grad_input = grad_weight = grad_bias = None
    kh, kw = w.dim(2), w.dim(3)
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if output_mask[0]:  # XLA's form: the gradient dilated by the stride, the kernel reversed
        if padding[0] > dilation[0] * (kh - 1) or padding[1] > dilation[1] * (kw - 1):
            raise Unsupported("aten.convolution_backward (padding wider than the dilated kernel)")
        grad_input = L.conv2d_input_grad(grad, w, stride, padding, dilation, [x.dim(2), x.dim(3)])
    if output_mask[1]:  # XLA's form: x read with its batch as the features, grad as the window
        grad_weight = L.conv2d_weight_grad(x, grad, stride, padding, dilation, [kh, kw])
    if output_mask[2]:
        grad_bias = L.reduce(SUM, grad, [0, 2, 3], False)
    return grad_input, grad_weight, grad_bias


# ---- pooling ----

def _pair(v, default=None):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if not v:
        return default
    return v * 2 if len(v) == 1 else v


@lowers(aten.max_pool2d_with_indices.default, aten.max_pool2d.default)
def max_pool2d(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    kernel, stride, padding = _pair(kernel), _pair(stride, _pair(kernel)), _pair(padding)
    if any(d != 1 for d in _pair(dilation)):
        raise Unsupported("aten.max_pool2d with dilation")
    if ceil_mode:  # the last, partial window: pad the high side with -inf up to it
        extra = [0, 0]
        for i in range(2):
            size = x.dim(2 + i)
            out = -(-(size + 2 * padding[i] - kernel[i]) // stride[i]) + 1
            if (out - 1) * stride[i] >= size + padding[i]:
                out -= 1
            extra[i] = max(0, (out - 1) * stride[i] + kernel[i] - (size + 2 * padding[i]))
        if any(extra):
            x = L.pad(x, [0, 0, 0, 0], [0, 0, extra[0], extra[1]], -math.inf)
    return L.pool2d(False, x, kernel, stride, padding), None


def _max_pool_values(x, *args):
    return max_pool2d(x, *args)[0]


LOWERINGS[aten.max_pool2d.default] = _max_pool_values


@lowers(aten.avg_pool2d.default)
def avg_pool2d(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    kernel, padding = _pair(kernel), _pair(padding)
    if ceil_mode or divisor_override or (not count_include_pad and any(padding)):
        raise Unsupported("aten.avg_pool2d (ceil_mode, divisor_override or padding not counted)")
    return L.pool2d(True, x, kernel, _pair(stride, kernel), padding)


@lowers(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel, stride = _pair(kernel), _pair(stride, _pair(kernel))
    if kernel != stride or any(_pair(padding)) or ceil_mode or divisor_override:
        raise Unsupported("aten.avg_pool2d_backward (overlapping or padded windows)")
    n, c, ho, wo = values(grad)
    h, w = x.dim(2), x.dim(3)
    ones = L.full(grad.dtype, [1, 1, 1, kernel[0], 1, kernel[1]], 1.0 / (kernel[0] * kernel[1]))
    spread = L.binary(MUL, reshape(grad, [n, c, ho, 1, wo, 1]), ones)  # each value over its window
    spread = reshape(spread, [n, c, ho * kernel[0], wo * kernel[1]])
    return L.pad(spread, [0, 0, 0, 0], [0, 0, h - ho * kernel[0], w - wo * kernel[1]], 0.0)


def _adaptive_dim(x, dim, size, out):
    if out == size:
        return x
    if size % out == 0:
        return None
    parts = []
    for i in range(out):
        start, stop = (i * size) // out, -((-(i + 1) * size) // out)
        parts.append(L.reduce(MEAN, L.slice(x, dim, start, stop, 1), [dim], True))
    return L.concat(parts, dim)


@lowers(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(x, output_size):
    oh, ow = _pair(output_size)
    h, w = x.dim(2), x.dim(3)
    if h % oh == 0 and w % ow == 0:
        kernel = [h // oh, w // ow]
        return L.pool2d(True, x, kernel, kernel, [0, 0])
    y = _adaptive_dim(x, 2, h, oh)
    if y is None:
        y = L.pool2d(True, x, [h // oh, 1], [h // oh, 1], [0, 0])
    z = _adaptive_dim(y, 3, w, ow)
    return z if z is not None else L.pool2d(True, y, [1, w // ow], [1, w // ow], [0, 0])


# ---- reductions and normalizations ----

def _reduce(op):
    def lower(x, dims=None, keepdim=False, dtype=None):
        if dtype is not None:
            x = L.cast(x, D.latch_dtype(dtype))
        if op == SUM and dtype is None and x.dtype not in D.FLOATS and x.dtype != D.I64:
            x = L.cast(x, D.I64)  # torch sums bools and integers as int64
        dims = [] if dims is None else ([dims] if isinstance(dims, int) else list(dims))
        return L.reduce(op, x, [norm_dim(d, x.rank) for d in dims], keepdim)
    return lower


lowers(aten.sum.dim_IntList, aten.sum.default)(_reduce(SUM))
lowers(aten.mean.dim, aten.mean.default)(_reduce(MEAN))
lowers(aten.amax.default)(_reduce(RMAX))
lowers(aten.amin.default)(_reduce(RMIN))


@lowers(aten.max.dim)
def max_dim(x, dim, keepdim=False):
    return L.reduce(RMAX, x, [norm_dim(dim, x.rank)], keepdim), L.argmax(x, dim, keepdim)


@lowers(aten.argmax.default)
def argmax(x, dim=None, keepdim=False):
    if dim is None:
        return L.argmax(L.reshape(x, [-1]), 0, False)
    return L.argmax(x, dim, keepdim)


@lowers(aten._softmax.default, aten.softmax.int)
def softmax(x, dim, half_to_float=False):
    return L.softmax(x, dim, False)


@lowers(aten._log_softmax.default, aten.log_softmax.int)
def log_softmax(x, dim, half_to_float=False):
    return L.softmax(x, dim, True)


@lowers(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad, output, dim, input_dtype):
    total = L.reduce(SUM, grad, [norm_dim(dim, grad.rank)], True)
    return L.binary(SUB, grad, L.binary(MUL, L.unary(EXP, output), total))


@lowers(aten._softmax_backward_data.default)
def softmax_backward(grad, output, dim, input_dtype):
    total = L.reduce(SUM, L.binary(MUL, grad, output), [norm_dim(dim, grad.rank)], True)
    return L.binary(MUL, output, L.binary(SUB, grad, total))


@lowers(aten.native_layer_norm.default)
def layer_norm(x, normalized_shape, weight, bias, eps):
    n = len(normalized_shape)
    out = L.layer_norm(x, n, weight, bias, eps)
    dims = list(range(x.rank - n, x.rank))
    mean = L.reduce(MEAN, x, dims, True)
    centered = L.binary(SUB, x, mean)
    var = L.reduce(MEAN, L.binary(MUL, centered, centered), dims, True)
    return out, mean, L.unary(RSQRT, L.binary(ADD, var, const(eps, var.dtype)))


@lowers(aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default
        if hasattr(aten, "_native_batch_norm_legit_no_training") else aten.native_batch_norm.default)
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    if training:
        raise Unsupported("aten.native_batch_norm in training mode (batch statistics)")
    empty = L.full(x.dtype, [0], 0.0)
    return L.batch_norm(x, running_mean, running_var, weight, bias, eps), empty, empty


@lowers(aten.embedding.default)
def embedding(table, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return L.embedding(table, indices)


@lowers(aten.nll_loss_forward.default)
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    if weight is not None or x.rank != 2:
        raise Unsupported("aten.nll_loss_forward (class weights or not [N, C])")
    picked, valid = _picked(x, target, ignore_index)
    total = L.reduce(SUM, L.binary(MUL, picked, valid), [], False)
    count = L.reduce(SUM, valid, [], False)
    loss = L.unary(NEG, total)
    if reduction == 1:
        loss = L.binary(DIV, loss, count)
    elif reduction == 0:
        loss = L.unary(NEG, L.binary(MUL, picked, valid))
    return loss, count


def _onehot(x, target):
    classes = L.iota(D.I64, [1, x.dim(1)], 1)
    return L.compare(EQ, classes, L.reshape(L.cast(target, D.I64), [-1, 1]))


def _picked(x, target, ignore_index):
    onehot = L.cast(_onehot(x, target), x.dtype)
    picked = L.reduce(SUM, L.binary(MUL, x, onehot), [1], False)
    valid = L.cast(L.compare(NE, target, const(ignore_index, target.dtype)), x.dtype)
    return picked, valid


@lowers(aten.nll_loss_backward.default)
def nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    if weight is not None or x.rank != 2:
        raise Unsupported("aten.nll_loss_backward (class weights or not [N, C])")
    valid = L.cast(L.compare(NE, target, const(ignore_index, target.dtype)), x.dtype)
    onehot = L.binary(MUL, L.cast(_onehot(x, target), x.dtype), L.reshape(valid, [-1, 1]))
    scale = L.unary(NEG, grad if grad.rank == 0 else L.reshape(grad, [-1, 1]))
    if reduction == 1:
        scale = L.binary(DIV, scale, total_weight)
    return L.binary(MUL, onehot, scale)


# ---- shapes ----

@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(x, size):
    return reshape(x, size)


@lowers(aten._reshape_alias.default)
def reshape_alias(x, size, stride):
    return reshape(x, size)


@lowers(aten.flatten.using_ints)
def flatten(x, start_dim=0, end_dim=-1):
    s, e = norm_dim(start_dim, x.rank), norm_dim(end_dim, x.rank)
    v = values(x)
    return reshape(x, v[:s] + [math.prod(v[s:e + 1])] + v[e + 1:])


@lowers(aten.t.default)
def t(x):
    return L.permute(x, [1, 0]) if x.rank == 2 else x


@lowers(aten.transpose.int)
def transpose(x, a, b):
    perm = list(range(x.rank))
    a, b = norm_dim(a, x.rank), norm_dim(b, x.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return L.permute(x, perm)


@lowers(aten.permute.default)
def permute(x, dims):
    return L.permute(x, [norm_dim(d, x.rank) for d in dims])


@lowers(aten.expand.default)
def expand(x, size, implicit=False):
    lead = len(size) - x.rank
    have = values(x)
    target = [have[i - lead] if s == -1 else s for i, s in enumerate(size)]
    if target[lead:] == have and lead == 0:
        return x
    if x.dtype == D.BOOL:
        return L.broadcast_to(x, target)
    # x times ones of the expanded dims: a broadcast that leaves x's own (maybe symbolic) dims alone
    ones = [t if i < lead or have[i - lead] != t else 1 for i, t in enumerate(target)]
    return L.binary(MUL, x, L.full(x.dtype, ones, 1.0))


@lowers(aten.unsqueeze.default)
def unsqueeze(x, dim):
    v = values(x)
    dim = norm_dim(dim, x.rank + 1)
    return reshape(x, v[:dim] + [1] + v[dim:])


@lowers(aten.squeeze.dim)
def squeeze(x, dim):
    v = values(x)
    dim = norm_dim(dim, x.rank)
    return x if v[dim] != 1 else reshape(x, v[:dim] + v[dim + 1:])


@lowers(aten.squeeze.default)
def squeeze_all(x):
    return reshape(x, [s for s in values(x) if s != 1])


@lowers(aten.slice.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):
    dim = norm_dim(dim, x.rank)
    size = x.size_of(dim)[0]
    start = 0 if start is None else start
    end = size if end is None or end > size else end
    if start == 0 and end == size and step == 1:
        return x
    return L.slice(x, dim, start, end, step)


@lowers(aten.select.int)
def select(x, dim, index):
    dim = norm_dim(dim, x.rank)
    v = values(x)
    index = index + v[dim] if index < 0 else index
    return reshape(L.slice(x, dim, index, index + 1, 1), v[:dim] + v[dim + 1:])


@lowers(aten.split.Tensor)
def split(x, size, dim=0):
    dim = norm_dim(dim, x.rank)
    total = x.size_of(dim)[0]
    return [L.slice(x, dim, s, min(s + size, total), 1) for s in range(0, total, size)]


@lowers(aten.split_with_sizes.default)
def split_with_sizes(x, sizes, dim=0):
    dim = norm_dim(dim, x.rank)
    out, at = [], 0
    for s in sizes:
        out.append(L.slice(x, dim, at, at + s, 1))
        at += s
    return out


@lowers(aten.cat.default)
def cat(tensors, dim=0):
    tensors = [t for t in tensors if not (t.rank == 1 and t.size_of(0)[0] == 0)]
    dtype = tensors[0].dtype
    return L.concat([L.cast(t, dtype) if t.dtype != dtype else t for t in tensors], norm_dim(dim, tensors[0].rank))


@lowers(aten.stack.default)
def stack(tensors, dim=0):
    return cat([unsqueeze(t, dim) for t in tensors], dim)


@lowers(aten.constant_pad_nd.default)
def constant_pad(x, pad, value=0):
    low, high = [0] * x.rank, [0] * x.rank
    for i in range(len(pad) // 2):
        low[x.rank - 1 - i], high[x.rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return L.pad(x, low, high, float(value))


# ---- attention (torch's fused MultiheadAttention path, vit_b_16 in inference) ----

@lowers(aten._native_multi_head_attention.default)
def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    if mask is not None:
        raise Unsupported("aten._native_multi_head_attention with a mask")
    head = embed_dim // num_head
    w_q, w_k, w_v = (L.slice(qkv_weight, 0, i * embed_dim, (i + 1) * embed_dim, 1) for i in range(3))
    b_q, b_k, b_v = (L.slice(qkv_bias, 0, i * embed_dim, (i + 1) * embed_dim, 1) for i in range(3))

    def heads(x, w, b):  # [B, S, E] -> [B, H, S, D]
        y = L.binary(ADD, L.matmul(x, L.permute(w, [1, 0])), b)
        v = values(y)
        return L.permute(reshape(y, [v[0], v[1], num_head, head]), [0, 2, 1, 3])

    q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
    scores = L.binary(DIV, L.matmul(q, L.permute(k, [0, 1, 3, 2])), const(math.sqrt(head), q.dtype))
    p = L.softmax(scores, -1, False)
    a = L.permute(L.matmul(p, v), [0, 2, 1, 3])
    av = values(a)
    a = reshape(a, [av[0], av[1], embed_dim])
    out = L.binary(ADD, L.matmul(a, L.permute(proj_weight, [1, 0])), proj_bias)
    if not need_weights:
        return out, L.full(out.dtype, [0], 0.0)
    return out, (L.reduce(MEAN, p, [1], False) if average_attn_weights else p)


# ---- in place: the op's value, then assigned to its first argument ----

def _in_place(fn):
    def lower(x, *args, **kwargs):
        y = fn(x, *args, **kwargs)
        if y.dtype != x.dtype:
            y = L.cast(y, x.dtype)
        L.assign(x, y)
        return x
    return lower


for _functional, _inplace in [(aten.add.Tensor, aten.add_.Tensor), (aten.add.Scalar, aten.add_.Scalar),
                              (aten.sub.Tensor, aten.sub_.Tensor), (aten.mul.Tensor, aten.mul_.Tensor),
                              (aten.mul.Scalar, aten.mul_.Scalar), (aten.div.Tensor, aten.div_.Tensor),
                              (aten.relu.default, aten.relu_.default), (aten.hardtanh.default, aten.hardtanh_.default),
                              (aten.clamp.default, aten.clamp_.default), (aten.masked_fill.Scalar, aten.masked_fill_.Scalar),
                              (aten.sigmoid.default, aten.sigmoid_.default), (aten.tanh.default, aten.tanh_.default),
                              (aten.gelu.default, aten.gelu_.default) if hasattr(aten, "gelu_") else
                              (aten.gelu.default, aten.gelu.default)]:
    if _inplace != _functional:
        LOWERINGS[_inplace] = _in_place(LOWERINGS[_functional])


@lowers(aten.copy_.default)
def copy_(dst, src, non_blocking=False):
    y = L.broadcast_to(src, values(dst)) if values(src) != values(dst) else src
    L.assign(dst, L.cast(y, dst.dtype))
    return dst


@lowers(aten.zero_.default)
def zero_(x):
    L.assign(x, L.full(x.dtype, values(x), 0.0))
    return x


@lowers(aten.fill_.Scalar)
def fill_(x, value):
    L.assign(x, L.full(x.dtype, values(x), float(value)))
    return x


@lowers(aten.dropout.default)
def dropout(x, p, train):
    return L.dropout(x, p) if train and p else x


@lowers(aten.native_dropout.default)
def native_dropout(x, p, train):
    return dropout(x, p, train), None


def _install():
    """The table the extension lowers through (python/src/dispatch.c), keyed by overload."""
    _latch.lower_table([(op, op._schema.name, op._overloadname, fn) for op, fn in LOWERINGS.items()])


_install()
