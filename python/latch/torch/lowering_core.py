"""aten ops of PyTorch's core set that lowering.py's table lacks, as latch ops: what the
capture (latch/torch/capture.py) leaves after functionalization and torch._decomp's
decompositions in the models PyTorch users run.

  take (a helper)            entries along one dim at int64 indices: the dim moved first, the
                             rest flattened, latch's embedding gather, moved back
  index.Tensor               advanced indexing: one linear index over the indexed dims,
                             take; indexed dims that are not adjacent are moved first
                             (PyTorch's rule: their result dims come first)
  index_put, slice_scatter,  a scatter over the written rows: a sum of one-hot products when
  select_scatter             accumulating; else each row takes the last value written to it
                             (as PyTorch's CPU kernels do for a repeated index), a gather;
                             a step-1 slice as a pad and a select; x[mask] = value as a where
  as_strided                 a reshape when the strides are contiguous up to size-1 dims,
                             else a gather of the flat offsets
  pad modes,                 take with an index list computed here
  upsample_nearest2d
  roll                       two slices concatenated
  flip                       latch's flip (HLO reverse)
  unbind, unsafe_split       slices
  baddbmm, addbmm            a batched product scaled and added
  cumsum                     a log-step scan: log2(n) shifted adds along the dim
  sort, topk                 a stable bitonic network along the dim (padded to a power of
                             two p): log2(p)^2 / 2 compare-exchange steps, entries carried
                             with their indices
  fill, zero, clamp_min/max, trunc, round, reciprocal, floor_divide, xor, linalg_vector_norm,
  leaky_relu, nan_to_num, where with scalars: elementwise from latch's ops
  _transformer_encoder_layer_fwd  PyTorch's fused encoder layer (its inference fast path):
                             attention, residuals, layer norms and the feed-forward, in either
                             norm order, with an optional additive or boolean mask"""
import math

import torch

from .. import _latch
from . import dtypes as D
from .lowering import (lowers, _install, values, norm_dim, reshape, const, operands, Unsupported, linear, layer_norm,
                       split_with_sizes,
                       NEG, ABS, SIGN, FLOOR, CEIL, ROUND, NOT, EXP, LOG, SQRT, TANH, SIGMOID,
                       ADD, SUB, MUL, DIV, REM, POW, MAX, MIN, AND, OR, XOR,
                       EQ, NE, LT, LE, GT, GE, SUM, MEAN, RMAX, RMIN)

aten = torch.ops.aten
L = _latch


def _index_const(items):
    return L.from_torch(torch.tensor(list(items), dtype=torch.int64))


def _zero(dtype):
    return L.full(dtype, [], 0.0)


# ---- gathers ----

def take(x, dim, idx):
    """x's entries at idx (a latch integer tensor) along dim: that dim becomes idx's dims."""
    dim = norm_dim(dim, x.rank)
    v = x.shape
    if x.dtype == D.BOOL:
        return L.cast(take(L.cast(x, D.I32), dim, idx), D.BOOL)
    perm = [dim] + [i for i in range(x.rank) if i != dim]
    rest = [v[i] for i in perm[1:]]
    moved = L.permute(x, perm) if dim else x
    table = L.reshape(moved, [v[dim], math.prod(rest)])
    picked = L.embedding(table, idx if idx.dtype == D.I64 else L.cast(idx, D.I64))
    k = idx.rank
    out = L.reshape(picked, list(idx.shape) + rest)
    if dim == 0:
        return out
    order = list(range(k, k + dim)) + list(range(k)) + list(range(k + dim, k + len(rest)))
    return L.permute(out, order)


def _wrapped(t, size):
    """Negative indices counted from the end, as int64."""
    t = L.cast(t, D.I64) if t.dtype != D.I64 else t
    return L.where(L.compare(LT, t, _zero(D.I64)), L.binary(ADD, t, L.full(D.I64, [], float(size))), t)


def _linear_index(x, indices):
    """(first indexed dim, count of indexed dims, linear int64 index) of adjacent indices."""
    at = [d for d, t in enumerate(indices) if t is not None]
    if not at:
        raise Unsupported("aten.index with no index tensors")
    if at != list(range(at[0], at[0] + len(at))):
        raise Unsupported("aten.index on dims that are not adjacent")
    if any(indices[d].dtype == D.BOOL for d in at):
        raise Unsupported("aten.index with a boolean mask (a size that depends on the values)")
    v = x.shape
    lin = None
    for d in at:
        t = _wrapped(indices[d], v[d])
        lin = t if lin is None else L.binary(ADD, L.binary(MUL, lin, L.full(D.I64, [], float(v[d]))), t)
    return at[0], len(at), lin


def _fronted(x, indices):
    """x and indices with the indexed dims moved first when they are not adjacent (PyTorch's
    rule: the result's indexed dims then come first), and the permutation (None: unmoved)."""
    indices = list(indices) + [None] * (x.rank - len(indices))
    at = [d for d, t in enumerate(indices) if t is not None]
    if not at or at == list(range(at[0], at[0] + len(at))):
        return x, indices, None
    perm = at + [d for d in range(x.rank) if d not in at]
    return L.permute(x, perm), [indices[d] for d in at] + [None] * (x.rank - len(at)), perm


def _merged(x, first, count):
    v = list(x.shape)
    return L.reshape(x, v[:first] + [math.prod(v[first:first + count])] + v[first + count:])


@lowers(aten.index.Tensor)
def index(x, indices):
    x, indices, _ = _fronted(x, indices)
    first, count, lin = _linear_index(x, indices)
    return take(_merged(x, first, count), first, lin)


@lowers(aten.index_select.default)
def index_select(x, dim, idx):
    return take(x, dim, _wrapped(idx, x.dim(dim)))


def _index_along(x, dim, idx):
    """The flattened x's index of x[..idx[..i..]..] along dim, at every position i of idx."""
    v, iv = x.shape, idx.shape
    strides = [math.prod(v[i + 1:]) for i in range(x.rank)]
    lin = L.binary(MUL, _wrapped(idx, v[dim]), L.full(D.I64, [], float(strides[dim])))
    for i in range(x.rank):
        if i != dim:
            lin = L.binary(ADD, lin, L.binary(MUL, L.iota(D.I64, list(iv), i), L.full(D.I64, [], float(strides[i]))))
    return lin


@lowers(aten.gather.default)
def gather(x, dim, idx, sparse_grad=False):
    """out[..i..] = x[..idx[..i..]..] along dim: a take over the flattened x with linear indices."""
    lin = _index_along(x, norm_dim(dim, x.rank), idx)
    return take(L.reshape(x, [-1]), 0, lin)


# ---- scatters ----

def _scatter_rows(xm, lin, vals, accumulate):
    """xm [N, R] with rows lin [K] written (or added) from vals [K, R]. Written, a row that
    lin names more than once takes the last of its values, as PyTorch's CPU kernels do."""
    n, k = xm.dim(0), lin.dim(0)
    hits = L.compare(EQ, L.iota(D.I64, [n, 1], 0), L.reshape(lin, [1, k]))  # [N, K]
    if not accumulate:
        last = L.reduce(RMAX, L.where(hits, L.iota(D.I64, [1, k], 1), L.full(D.I64, [], -1.0)), [1], True)  # [N, 1]
        written = L.compare(GE, last, _zero(D.I64))
        picked = take(vals, 0, L.reshape(L.binary(MAX, last, _zero(D.I64)), [n]))
        return L.where(written, picked, xm)
    if xm.dtype in (D.F32, D.F64):
        contrib = L.matmul(L.cast(hits, xm.dtype), vals)
    else:
        spread = L.where(L.reshape(hits, [n, k, 1]), L.reshape(vals, [1, k, -1]), _zero(vals.dtype))
        contrib = L.reduce(SUM, L.cast(spread, D.F64) if xm.dtype in (D.F16, D.BF16) else spread, [1], False)
        contrib = L.cast(contrib, xm.dtype)
    return L.binary(ADD, xm, contrib)


def _put(x, first, count, lin, vals, accumulate):
    """x with the entries at linear index lin over dims first..first+count put from vals."""
    v = list(x.shape)
    merged = _merged(x, first, count)
    mv = list(merged.shape)
    perm = [first] + [i for i in range(len(mv)) if i != first]
    xm = L.reshape(L.permute(merged, perm) if first else merged, [mv[first], -1])
    k = lin.rank
    lv = list(lin.shape)
    target = mv[:first] + lv + mv[first + 1:]
    vals = L.cast(vals, x.dtype) if vals.dtype != x.dtype else vals
    if list(vals.shape) != target:
        vals = L.broadcast_to(vals, target)
    vorder = list(range(first, first + k)) + list(range(first)) + list(range(first + k, len(target)))
    vm = L.reshape(L.permute(vals, vorder) if first else vals, [math.prod(lv), -1])
    out = _scatter_rows(xm, L.reshape(lin, [-1]), vm, accumulate)
    moved = [mv[i] for i in perm]
    back = L.reshape(out, moved)
    if first:
        inverse = [perm.index(i) for i in range(len(perm))]
        back = L.permute(back, inverse)
    return L.reshape(back, v)


@lowers(aten.index_put.default, aten._unsafe_index_put.default if hasattr(aten, "_unsafe_index_put")
        else aten.index_put.default)
def index_put(x, indices, vals, accumulate=False):
    indices = list(indices)
    masks = [t for t in indices if t is not None and t.dtype == D.BOOL]
    if masks:
        return _put_masked(x, indices, vals, accumulate)
    moved, indices, perm = _fronted(x, indices)
    first, count, lin = _linear_index(moved, indices)
    out = _put(moved, first, count, lin, vals, accumulate)
    return L.permute(out, [perm.index(i) for i in range(x.rank)]) if perm else out


def _put_masked(x, indices, vals, accumulate):
    """x[mask] = v with one boolean mask over x's leading dims and one value (a scalar or a
    one-element tensor): a where, whatever the count of True entries."""
    if len(indices) != 1 or indices[0].rank > x.rank or math.prod(vals.shape) != 1:
        raise Unsupported("aten.index_put with a boolean mask and more than one value")
    mask = indices[0]
    if list(mask.shape) != list(x.shape)[:mask.rank]:
        raise Unsupported("aten.index_put with a boolean mask that is not x's leading dims")
    mask = L.reshape(mask, list(mask.shape) + [1] * (x.rank - mask.rank))
    v = L.reshape(L.cast(vals, x.dtype) if vals.dtype != x.dtype else vals, [])
    return L.where(mask, L.binary(ADD, x, v) if accumulate else L.broadcast_to(v, list(x.shape)), x)


@lowers(aten.index_put_.default)
def index_put_(x, indices, vals, accumulate=False):
    L.assign(x, index_put(x, indices, vals, accumulate))
    return x


@lowers(aten.slice_scatter.default)
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    dim = norm_dim(dim, x.rank)
    size = x.dim(dim)
    start = 0 if start is None else (start + size if start < 0 else min(start, size))
    end = size if end is None else (end + size if end < 0 else min(end, size))
    src = L.cast(src, x.dtype) if src.dtype != x.dtype else src
    if step == 1:
        low, high = [0] * x.rank, [0] * x.rank
        low[dim], high[dim] = start, size - end
        padded = L.pad(src, low, high, 0.0) if x.dtype != D.BOOL else L.cast(L.pad(L.cast(src, D.I32), low, high, 0.0), D.BOOL)
        at = L.iota(D.I64, [size if i == dim else 1 for i in range(x.rank)], dim)
        inside = L.binary(AND, L.compare(GE, at, L.full(D.I64, [], float(start))),
                          L.compare(LT, at, L.full(D.I64, [], float(end))))
        return L.where(inside, padded, x)
    return _put(x, dim, 1, _index_const(range(start, end, step)), src, False)


@lowers(aten.select_scatter.default)
def select_scatter(x, src, dim, index_):
    dim = norm_dim(dim, x.rank)
    index_ = index_ + x.dim(dim) if index_ < 0 else index_
    shape = list(src.shape)
    return slice_scatter(x, L.reshape(src, shape[:dim] + [1] + shape[dim:]), dim, index_, index_ + 1, 1)


@lowers(aten.scatter.src, aten.scatter.value)
def scatter(x, dim, idx, src):
    """x with x[..idx[..i..]..] = src[..i..] along dim: _put over the flattened x."""
    v, iv = x.shape, idx.shape
    lin = _index_along(x, norm_dim(dim, x.rank), idx)
    if not isinstance(src, L.Tensor):
        src = L.full(x.dtype, list(iv), float(src))
    elif list(src.shape) != list(iv):
        src = L.slice(src, 0, 0, iv[0], 1) if src.rank == 1 else src
        for d in range(src.rank):
            if src.dim(d) != iv[d]:
                src = L.slice(src, d, 0, iv[d], 1)
    flat = _put(L.reshape(x, [-1]), 0, 1, L.reshape(lin, [-1]), L.reshape(src, [-1]), False)
    return L.reshape(flat, list(v))


# ---- views as gathers and slices ----

@lowers(aten.as_strided.default)
def as_strided(x, size, stride, storage_offset=None):
    size, stride, offset = list(size), list(stride), storage_offset or 0
    numel = math.prod(size)
    kept = [(s, t) for s, t in zip(size, stride) if s != 1]
    contiguous = all(t == math.prod(s2 for s2, _ in kept[i + 1:]) for i, (s, t) in enumerate(kept))
    total = math.prod(x.shape)
    if offset == 0 and contiguous and numel == total:
        return L.reshape(x, size)
    if offset == 0 and contiguous and numel < total:
        return L.reshape(L.slice(L.reshape(x, [-1]), 0, 0, numel, 1), size)
    last = offset + sum((s - 1) * t for s, t in zip(size, stride))
    if last >= total or any(t < 0 for t in stride):
        raise Unsupported("aten.as_strided beyond its input's elements")
    lin = L.full(D.I64, size, float(offset))
    for i, t in enumerate(stride):
        if size[i] != 1 and t:
            lin = L.binary(ADD, lin, L.binary(MUL, L.iota(D.I64, size, i), L.full(D.I64, [], float(t))))
    return take(L.reshape(x, [-1]), 0, lin)


@lowers(aten.unbind.int)
def unbind(x, dim=0):
    dim = norm_dim(dim, x.rank)
    v = list(x.shape)
    return [L.reshape(L.slice(x, dim, i, i + 1, 1), v[:dim] + v[dim + 1:]) for i in range(v[dim])]


@lowers(aten.unsafe_split.Tensor)
def unsafe_split(x, size, dim=0):
    dim = norm_dim(dim, x.rank)
    total = x.dim(dim)
    return [L.slice(x, dim, s, min(s + size, total), 1) for s in range(0, total, size)]


# the sizes are given: the same slices as split_with_sizes
lowers(aten.unsafe_split_with_sizes.default)(split_with_sizes)


@lowers(aten.roll.default)
def roll(x, shifts, dims=()):
    shifts, dims = list(shifts), list(dims)
    if not dims:
        return L.reshape(roll(L.reshape(x, [-1]), shifts, [0]), list(x.shape))
    for s, d in zip(shifts, dims):
        n = x.dim(d)
        s %= n if n else 1
        if s:
            x = L.concat([L.slice(x, norm_dim(d, x.rank), n - s, n, 1), L.slice(x, norm_dim(d, x.rank), 0, n - s, 1)],
                         norm_dim(d, x.rank))
    return x


@lowers(aten.flip.default)
def flip(x, dims):
    return L.flip(x, [norm_dim(d, x.rank) for d in dims])


def _pad_index(n, low, high, mode):
    def at(i):
        if mode == "reflect":
            period = 2 * (n - 1)
            j = i % period if period else 0
            return j if j < n else period - j
        if mode == "replicate":
            return min(max(i, 0), n - 1)
        return i % n  # circular
    return [at(i) for i in range(-low, n + high)]


def _pad_mode(mode, spatial):
    def lower(x, padding):
        if any(p < 0 for p in padding):
            raise Unsupported(f"{mode} padding with a negative size")
        for i in range(spatial):
            low, high = padding[2 * i], padding[2 * i + 1]
            d = x.rank - 1 - i
            if low or high:
                x = take(x, d, _index_const(_pad_index(x.dim(d), low, high, mode)))
        return x
    return lower


for _mode, _name in [("reflect", "reflection_pad"), ("replicate", "replication_pad")]:
    for _k in (1, 2, 3):
        _op = getattr(aten, f"{_name}{_k}d", None)
        if _op is not None:
            lowers(_op.default)(_pad_mode(_mode, _k))


@lowers(aten._pad_circular.default if hasattr(aten, "_pad_circular") else aten.reflection_pad1d.default)
def pad_circular(x, padding):
    return _pad_mode("circular", len(padding) // 2)(x, padding)


def _nearest(size, out, scale):
    s = (1.0 / scale) if scale else size / out
    return [min(int(math.floor(i * s)), size - 1) for i in range(out)]


@lowers(aten.upsample_nearest2d.default)
def upsample_nearest2d(x, output_size, scales_h=None, scales_w=None):
    oh, ow = output_size
    x = take(x, 2, _index_const(_nearest(x.dim(2), oh, scales_h)))
    return take(x, 3, _index_const(_nearest(x.dim(3), ow, scales_w)))


@lowers(aten.upsample_nearest2d.vec)
def upsample_nearest2d_vec(x, output_size, scale_factors):
    h, w = x.dim(2), x.dim(3)
    if output_size is None:
        output_size = [int(math.floor(h * scale_factors[0])), int(math.floor(w * scale_factors[1]))]
        return upsample_nearest2d(x, output_size, scale_factors[0], scale_factors[1])
    return upsample_nearest2d(x, output_size)


# ---- products ----

def _add_scaled(bias, product, beta, alpha):
    if alpha != 1:
        product = L.binary(MUL, product, const(alpha, product.dtype))
    if beta == 0:
        return product
    if beta != 1:
        bias = L.binary(MUL, bias, const(beta, bias.dtype))
    return L.binary(ADD, product, bias)


@lowers(aten.baddbmm.default)
def baddbmm(bias, a, b, beta=1, alpha=1):
    return _add_scaled(bias, L.matmul(a, b), beta, alpha)


@lowers(aten.addbmm.default)
def addbmm(bias, a, b, beta=1, alpha=1):
    return _add_scaled(bias, L.reduce(SUM, L.matmul(a, b), [0], False), beta, alpha)


@lowers(aten.addmv.default)
def addmv(bias, m, v, beta=1, alpha=1):
    return _add_scaled(bias, L.matmul(m, v), beta, alpha)


# ---- along a dim: scans and orders ----

def _last(x, dim):
    """x with dim moved last, and the permutation that moves it back."""
    dim = norm_dim(dim, x.rank)
    perm = [i for i in range(x.rank) if i != dim] + [dim]
    back = [perm.index(i) for i in range(x.rank)]
    return (L.permute(x, perm) if dim != x.rank - 1 else x), back, dim


@lowers(aten.cumsum.default)
def cumsum(x, dim, dtype=None):
    """A log-step scan: log2(n) adds of the running sums shifted by 1, 2, 4, ... along dim."""
    if dtype is not None:
        x = L.cast(x, D.latch_dtype(dtype))
    elif x.dtype in (D.BOOL, D.I8, D.I16, D.I32, D.U8):
        x = L.cast(x, D.I64)
    if x.rank == 0:
        return x
    dim = norm_dim(dim, x.rank)
    n, shift = x.dim(dim), 1
    while shift < n:
        low, high = [0] * x.rank, [0] * x.rank
        low[dim] = shift
        x = L.binary(ADD, x, L.pad(L.slice(x, dim, 0, n - shift, 1), low, high, 0.0))
        shift *= 2
    return x


def _before(a, ai, b, bi, n, descending, floats):
    """Whether entry (a, index ai) goes before (b, bi) in a stable sort: NaN after every
    number ascending, before every number descending (PyTorch's order); the padding past n
    after everything."""
    if floats:
        a_nan, b_nan = L.compare(NE, a, a), L.compare(NE, b, b)
        if descending:
            first = L.binary(OR, L.compare(GT, a, b), L.binary(AND, a_nan, L.unary(NOT, b_nan)))
        else:
            first = L.binary(OR, L.compare(LT, a, b), L.binary(AND, L.unary(NOT, a_nan), b_nan))
        same = L.binary(OR, L.compare(EQ, a, b), L.binary(AND, a_nan, b_nan))
    else:
        first = L.compare(GT if descending else LT, a, b)
        same = L.compare(EQ, a, b)
    limit = L.full(D.I64, [], float(n))
    return L.binary(AND, L.compare(LT, ai, limit), L.binary(OR, L.compare(GE, bi, limit), L.binary(
        OR, first, L.binary(AND, same, L.compare(LT, ai, bi)))))


def _bitonic(moved, descending):
    """(values, int64 indices) of moved sorted along its last dim, stably: a bitonic network
    over the dim padded to a power of two, its entries carried with their indices (log2(p)
    (log2(p) + 1) / 2 compare-exchange steps, each elementwise over the whole tensor)."""
    shape = list(moved.shape)
    n, lead = shape[-1], shape[:-1]
    p = 1 << max(n - 1, 0).bit_length()
    floats = moved.dtype in D.FLOATS
    vals = L.pad(moved, [0] * len(shape), [0] * (len(shape) - 1) + [p - n], 0.0) if p > n else moved
    idx = L.broadcast_to(L.iota(D.I64, [p], 0), lead + [p])
    k = 2
    while k <= p:
        j = k // 2
        while j:
            blocks = p // (2 * j)
            up = L.from_torch(torch.tensor([((b * 2 * j) & k) == 0 for b in range(blocks)]).reshape(blocks, 1))
            v = L.reshape(vals, lead + [blocks, 2, j])
            i = L.reshape(idx, lead + [blocks, 2, j])
            r = len(lead) + 1
            a, b = L.slice(v, r, 0, 1, 1), L.slice(v, r, 1, 2, 1)
            ai, bi = L.slice(i, r, 0, 1, 1), L.slice(i, r, 1, 2, 1)
            a, b, ai, bi = (L.reshape(t, lead + [blocks, j]) for t in (a, b, ai, bi))
            swap = L.where(up, _before(b, bi, a, ai, n, descending, floats), _before(a, ai, b, bi, n, descending, floats))
            pair = lead + [blocks, 1, j]
            vals = L.reshape(L.concat([L.reshape(L.where(swap, b, a), pair), L.reshape(L.where(swap, a, b), pair)], r),
                             lead + [p])
            idx = L.reshape(L.concat([L.reshape(L.where(swap, bi, ai), pair), L.reshape(L.where(swap, ai, bi), pair)], r),
                            lead + [p])
            j //= 2
        k *= 2
    return vals, idx


def _sorted(x, dim, descending, count=None):
    if x.rank == 0:
        return x, L.full(D.I64, [], 0.0)
    if x.dtype == D.BOOL:
        vals, idx = _sorted(L.cast(x, D.I32), dim, descending, count)
        return L.cast(vals, D.BOOL), idx
    moved, back, dim = _last(x, dim)
    n = moved.dim(moved.rank - 1)
    count = n if count is None else count
    vals, idx = _bitonic(moved, descending)
    if count != vals.dim(vals.rank - 1):
        vals, idx = L.slice(vals, vals.rank - 1, 0, count, 1), L.slice(idx, idx.rank - 1, 0, count, 1)
    if back != list(range(x.rank)):
        vals, idx = L.permute(vals, back), L.permute(idx, back)
    return vals, idx


@lowers(aten.sort.default)
def sort(x, dim=-1, descending=False):
    return _sorted(x, dim, descending)


@lowers(aten.sort.stable)
def sort_stable(x, stable=None, dim=-1, descending=False):
    return _sorted(x, dim, descending)


@lowers(aten.topk.default)
def topk(x, k, dim=-1, largest=True, sorted=True):
    return _sorted(x, dim, largest, k)


# ---- elementwise ----

@lowers(aten.fill.Scalar, aten.fill.Tensor)
def fill(x, value):
    if isinstance(value, L.Tensor):
        return L.broadcast_to(L.cast(value, x.dtype), list(x.shape)) if value.rank == 0 else L.cast(value, x.dtype)
    return L.full(x.dtype, values(x), float(value))


@lowers(aten.zero.default)
def zero(x):
    return L.full(x.dtype, values(x), 0.0)


@lowers(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, low):
    return L.binary(MAX, *operands(x, low))


@lowers(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, high):
    return L.binary(MIN, *operands(x, high))


@lowers(aten.clamp.Tensor)
def clamp_tensor(x, low=None, high=None):
    if low is not None:
        x = clamp_min(x, low)
    return clamp_max(x, high) if high is not None else x


@lowers(aten.trunc.default)
def trunc(x):
    if x.dtype not in D.FLOATS:
        return x
    return L.where(L.compare(LT, x, _zero(x.dtype)), L.unary(CEIL, x), L.unary(FLOOR, x))


@lowers(aten.round.default)
def round_(x):
    return L.unary(ROUND, x) if x.dtype in D.FLOATS else x


@lowers(aten.reciprocal.default)
def reciprocal(x):
    if x.dtype not in D.FLOATS:
        x = L.cast(x, D.F32)
    return L.binary(DIV, const(1.0, x.dtype), x)


@lowers(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(a, b):
    a, b = operands(a, b)
    q = L.binary(DIV, a, b)
    if q.dtype in D.FLOATS:
        return L.unary(FLOOR, q)
    # integers: latch's division truncates; one less where the remainder's sign differs from b's
    r = L.binary(SUB, a, L.binary(MUL, q, b))
    zero_ = _zero(r.dtype)
    off = L.binary(AND, L.compare(NE, r, zero_), L.compare(NE, L.compare(LT, r, zero_), L.compare(LT, b, zero_)))
    return L.binary(SUB, q, L.cast(off, q.dtype))


def _floor_remainder(a, b):
    """a - floor(a / b) * b: the result takes b's sign (Python's and PyTorch's remainder)."""
    r = L.binary(REM, a, b)  # latch's remainder takes a's sign (C's fmod)
    zero_ = _zero(r.dtype)
    fix = L.binary(AND, L.compare(NE, r, zero_), L.compare(NE, L.compare(LT, r, zero_), L.compare(LT, b, zero_)))
    return L.where(fix, L.binary(ADD, r, b), r)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(a, b):
    return _floor_remainder(*operands(a, b))


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, rounding_mode=None):
    a, b = operands(a, b)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if rounding_mode == "trunc":
        q = L.binary(DIV, a, b)
        return trunc(q) if q.dtype in D.FLOATS else q
    if a.dtype not in D.FLOATS and b.dtype not in D.FLOATS:
        a = L.cast(a, D.F32)
    return L.binary(DIV, a, b)


def _whole(op):
    def lower(x):
        return L.reduce(op, x if x.dtype != D.BOOL else L.cast(x, D.I32), list(range(x.rank)), False) \
            if x.dtype != D.BOOL else L.cast(L.reduce(op, L.cast(x, D.I32), list(range(x.rank)), False), D.BOOL)
    return lower


lowers(aten.max.default)(_whole(RMAX))
lowers(aten.min.default)(_whole(RMIN))


@lowers(aten.min.dim)
def min_dim(x, dim, keepdim=False):
    values_ = L.reduce(RMIN, x, [norm_dim(dim, x.rank)], keepdim)
    return values_, L.argmax(L.unary(NEG, x) if x.dtype in D.FLOATS else L.binary(SUB, _zero(x.dtype), x), dim, keepdim)


@lowers(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.logical_xor.default)
def xor(a, b):
    a, b = operands(a, b)
    return L.binary(XOR, a, b)


@lowers(aten.bitwise_and.Scalar)
def bitwise_and_scalar(a, b):
    return L.binary(AND, *operands(a, b))


@lowers(aten.bitwise_or.Scalar)
def bitwise_or_scalar(a, b):
    return L.binary(OR, *operands(a, b))


@lowers(aten.where.ScalarSelf)
def where_scalar_self(cond, a, b):
    return L.where(cond, const(a, b.dtype), b)


@lowers(aten.where.ScalarOther)
def where_scalar_other(cond, a, b):
    return L.where(cond, a, const(b, a.dtype))


@lowers(aten.where.Scalar)
def where_scalars(cond, a, b):
    dtype = D.F32 if isinstance(a, float) or isinstance(b, float) else D.I64
    return L.where(cond, L.full(dtype, [], float(a)), L.full(dtype, [], float(b)))


@lowers(aten.leaky_relu.default)
def leaky_relu(x, slope=0.01):
    return L.where(L.compare(GT, x, _zero(x.dtype)), x, L.binary(MUL, x, const(slope, x.dtype)))


@lowers(aten.linalg_vector_norm.default)
def vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = L.cast(x, D.latch_dtype(dtype))
    dims = list(range(x.rank)) if dim is None or dim == [] else [norm_dim(d, x.rank) for d in
                                                                 (dim if isinstance(dim, (list, tuple)) else [dim])]
    a = L.unary(ABS, x)
    if ord == math.inf:
        return L.reduce(RMAX, a, dims, keepdim)
    if ord == -math.inf:
        return L.reduce(RMIN, a, dims, keepdim)
    if ord == 0:
        return L.reduce(SUM, L.cast(L.compare(NE, x, _zero(x.dtype)), x.dtype), dims, keepdim)
    if ord == 1:
        return L.reduce(SUM, a, dims, keepdim)
    if ord == 2:
        return L.unary(SQRT, L.reduce(SUM, L.binary(MUL, x, x), dims, keepdim))
    total = L.reduce(SUM, L.binary(POW, a, const(float(ord), x.dtype)), dims, keepdim)
    return L.binary(POW, total, const(1.0 / ord, x.dtype))


@lowers(aten.nan_to_num.default)
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by 0 and the dtype's largest and lowest finite values
    unless given)."""
    if x.dtype not in D.FLOATS:
        return x
    info = torch.finfo(D.TO_TORCH[x.dtype])
    big = const(info.max if posinf is None else posinf, x.dtype)
    low = const(info.min if neginf is None else neginf, x.dtype)
    x = L.where(L.compare(NE, x, x), const(0.0 if nan is None else nan, x.dtype), x)
    x = L.where(L.compare(EQ, x, const(math.inf, x.dtype)), big, x)
    return L.where(L.compare(EQ, x, const(-math.inf, x.dtype)), low, x)


@lowers(aten.sign.default)
def sign(x):
    if x.dtype == D.BOOL:
        return x
    return L.unary(SIGN, x)


# ---- PyTorch's fused encoder layer ----

def _attention(x, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, mask):
    b, s, _ = x.shape
    head = embed_dim // heads
    qkv = linear(x, qkv_w, qkv_b)  # [B, S, 3E]

    def part(i):
        y = L.slice(qkv, 2, i * embed_dim, (i + 1) * embed_dim, 1)
        return L.permute(L.reshape(y, [b, s, heads, head]), [0, 2, 1, 3])

    q, k, v = part(0), part(1), part(2)
    scores = L.binary(DIV, L.matmul(q, L.permute(k, [0, 1, 3, 2])), const(math.sqrt(head), q.dtype))
    if mask is not None:
        if mask.dtype == D.BOOL:  # True: not attended
            scores = L.where(mask, L.full(scores.dtype, [], -math.inf), scores)
        else:
            scores = L.binary(ADD, scores, mask)
    p = L.softmax(scores, -1, False)
    a = L.reshape(L.permute(L.matmul(p, v), [0, 2, 1, 3]), [b, s, embed_dim])
    return linear(a, proj_w, proj_b)


def _encoder_mask(mask, mask_type, b, s):
    """The mask as scores see it ([B, H or 1, S, S] broadcastable): type 0 [S, S], type 1 a
    key padding mask [B, S], else as given."""
    if mask is None:
        return None
    if mask.rank == 2 and (mask_type == 1 or list(mask.shape) == [b, s] and mask_type != 0):
        return L.reshape(mask, [b, 1, 1, s])
    if mask.rank == 2:
        return L.reshape(mask, [1, 1, s, s])
    if mask.rank == 3:
        return L.reshape(mask, [mask.dim(0), 1, s, s])
    return mask


@lowers(aten._transformer_encoder_layer_fwd.default)
def transformer_encoder_layer(src, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps,
                              n1_w, n1_b, n2_w, n2_b, f1_w, f1_b, f2_w, f2_b, mask=None, mask_type=None):
    if src.rank != 3:
        raise Unsupported("aten._transformer_encoder_layer_fwd on a nested or unbatched input")
    b, s, _ = src.shape
    m = _encoder_mask(mask, mask_type, b, s)

    def norm(x, w, bias):
        return L.layer_norm(x, 1, w, bias, eps)

    def ffn(x):
        h = linear(x, f1_w, f1_b)
        h = L.gelu(h, False) if use_gelu else L.relu(h)
        return linear(h, f2_w, f2_b)

    x = src
    if norm_first:
        x = L.binary(ADD, x, _attention(norm(x, n1_w, n1_b), embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, m))
        return L.binary(ADD, x, ffn(norm(x, n2_w, n2_b)))
    x = norm(L.binary(ADD, x, _attention(x, embed_dim, num_heads, qkv_w, qkv_b, proj_w, proj_b, m)), n1_w, n1_b)
    return norm(L.binary(ADD, x, ffn(x)), n2_w, n2_b)


_install()  # the extension's table again, with these
