"""The core-set lowerings (latch/torch/lowering_core.py) and the elementwise ops of
lowering.py that had no value test, each compiled whole and checked against eager PyTorch on
seeded inputs, in f32 and in the other dtypes the op takes."""
import pytest
import torch
import torch.nn.functional as F

import latch.torch as lt
from conftest import close

g = torch.Generator().manual_seed(0)
X = torch.randn(3, 5, generator=g)
Y = torch.randn(3, 5, generator=g)
IMG = torch.randn(2, 3, 6, 7, generator=g)
I = torch.randint(-7, 8, (3, 5), generator=g)
J = torch.randint(1, 5, (3, 5), generator=g)
B = torch.rand(3, 5, generator=g) > 0.5
IDX = torch.tensor([2, 0, 2, 1])
CUBE = torch.randn(3, 5, 4, generator=g)
LONG = torch.randn(2, 37, generator=g)
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
NO_HALF = [torch.float32, torch.float64, torch.bfloat16]  # eager has no f16 cpu kernel

CASES = {
    # name: (fn, inputs, dtypes the float inputs take)
    "floor_ceil_round_trunc": (lambda a: a.floor() + a.ceil() * 2 + torch.round(a * 3) + torch.trunc(a * 3), [X * 3], NO_HALF),
    "sign_abs_neg": (lambda a: torch.sign(a) * 5 + a.abs() - a, [X], FLOATS),
    "nan_to_num": (lambda a: torch.nan_to_num(torch.log(a)) + torch.nan_to_num(a / 0, 1.0, 2.0, -3.0)
                   + (torch.nan_to_num(a / 0) == torch.finfo(a.dtype).max).to(a.dtype) * 4
                   + (torch.nan_to_num(a / 0) == torch.finfo(a.dtype).min).to(a.dtype) * 8, [X], NO_HALF),
    "expm1_log1p": (lambda a: torch.expm1(a) + torch.log1p(a.abs()), [X], NO_HALF),
    "silu_hardswish_hardsigmoid": (lambda a: F.silu(a) + F.hardswish(a * 3) + F.hardsigmoid(a * 3), [X], NO_HALF),
    "leaky_relu_elu": (lambda a: F.leaky_relu(a, 0.2) + F.elu(a), [X], NO_HALF),
    "reciprocal_square": (lambda a: torch.reciprocal(a.abs() + 1) + torch.square(a), [X], FLOATS),
    "remainder": (lambda a, b: torch.remainder(a * 4, b.abs() + 0.5) + torch.remainder(a * 4, 1.5), [X, Y], FLOATS),
    "clamp_min_max": (lambda a, b: torch.clamp(a, min=-0.3) + torch.clamp(a, max=0.2) + torch.clamp(a, b, b + 1), [X, Y], NO_HALF),
    "where_broadcast": (lambda a, b: torch.where(a[:, :1] > 0, a, b[:1]) + torch.where(a > 0, a, 0.5) + torch.where(a > 0, 1.0, b), [X, Y], FLOATS),
    "masked_fill_neg_inf_softmax": (lambda a: torch.softmax(a.masked_fill(torch.ones(5, 5).triu(1).bool()[:3], float("-inf")), -1), [X], FLOATS[:2]),
    "argmax_max_dim": (lambda a: a.argmax(1).float() + a.argmax().float() + a.max(0).values.sum(), [X], FLOATS[:2]),
    "stack_cat": (lambda a, b: torch.stack([a, b, a * b], 1).sum(1) + torch.cat([a, b], 0)[1:4], [X, Y], FLOATS),
    "triu_tril": (lambda a: a.triu(1) + a.tril(-1) * 2 + a.triu(), [X], FLOATS),
    "baddbmm_addbmm_addmm": (lambda a, b: torch.baddbmm(a[:2, :3, None] * b[0, :3], a[:2, :3, None], b[:2, None, :3], beta=0.5, alpha=2).sum(0)
                             + torch.addbmm(a[:3, :3], a[:, :, None][:, :3], b[:, None, :3]) + torch.addmm(a[:, :3], a, b.t(), beta=2), [X, Y], FLOATS[:2]),
    "unbind_split_chunk": (lambda a: sum(t * (i + 1) for i, t in enumerate(a.unbind(1))) + torch.cat(a.chunk(2, 1)[::-1], 1)[:, 0]
                           + a.split([2, 3], 1)[1].sum(1), [X], FLOATS),
    "roll_flip": (lambda a: torch.roll(a, 2, 1) + torch.roll(a, (1, -2), (0, 1)) + torch.flip(a, [0, 1]) + torch.roll(a, 4), [X], FLOATS),
    "meshgrid": (lambda a: sum(t for t in torch.meshgrid(a[0], a[1, :4], indexing="ij")) + torch.meshgrid(a[0], a[1], indexing="xy")[0].sum(), [X], FLOATS),
    "cumsum": (lambda a: torch.cumsum(a, 1) + torch.cumsum(a, 0) * 2, [X], FLOATS[:2]),
    "cumsum_long_dim": (lambda a: torch.cumsum(a, 1) + torch.cumsum(a.t(), 0).t() * 2, [LONG], FLOATS[:2]),
    "sort": (lambda a: torch.cat([torch.sort(a, 1)[0], torch.sort(a, 0, descending=True)[0]], 0), [X], FLOATS[:2]),
    "sort_indices": (lambda a: torch.sort(a, 1)[1] * 10 + torch.sort(a, 0, descending=True)[1], [X], FLOATS[:2]),
    "sort_long_dim_nan_ties": (lambda a: _sort_nan_ties(a), [LONG], FLOATS[:2]),
    "topk": (lambda a: torch.topk(a, 2, 1)[0].sum() + torch.topk(a, 2, 0, largest=False)[0].sum(0)[:3] + torch.topk(a, 3)[1].to(a.dtype), [X], FLOATS[:2]),
    "index_tensor": (lambda a: a[IDX] + a[:, IDX].t()[:, :3].sum() + a[IDX, IDX] .sum() + a[torch.tensor([[0, -1]])].sum(), [X], FLOATS),
    "index_put": (lambda a, b: a.index_put((IDX[1:],), b[:3]) + a.index_put((IDX[:3],), b[:3], accumulate=True)
                  + a.index_put((IDX,), b[:, :1], accumulate=True), [X[:3], torch.randn(4, 5, generator=g)], FLOATS[:2]),
    "index_put_repeated_index": (lambda a, b: a.index_put((IDX,), b) + a.index_put((IDX[:, None], torch.tensor([[1, 4, 1]])), b[0, 0] * 3),
                                 [X[:3], torch.randn(4, 5, generator=g)], FLOATS),
    "index_non_adjacent": (lambda a: a[IDX, :, IDX[:3, None]] + a[:, IDX[:3]][IDX[1:], ..., IDX[:3]].sum() + a[IDX[:2], 1:3, torch.tensor([0, 3])].t().sum(),
                           [CUBE], FLOATS),
    "index_put_non_adjacent": (lambda a, b: torch.ops.aten.index_put(a, [IDX[1:], None, torch.tensor([3, 0, 1])], b)
                               + torch.ops.aten.index_put(a, [IDX[1:], None, torch.tensor([3, 0, 1])], b[:1, :1], True),
                               [CUBE, torch.randn(3, 5, generator=g)], FLOATS),
    "mask_setitem": (lambda a: _mask_setitem(a), [CUBE], FLOATS),
    "setitem": (lambda a, b: _setitem(a, b), [X, Y], FLOATS),
    "gather_scatter": (lambda a: torch.gather(a, 1, torch.tensor([[0, 4], [1, 1], [3, 2]])).sum() + a.index_select(1, torch.tensor([4, 0])).sum(0)
                       + torch.zeros_like(a).scatter(1, torch.tensor([[1], [0], [4]]), a[:, :1]).sum(1, keepdim=True)[:2].t().sum(), [X], FLOATS[:2]),
    "pad_modes": (lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect").sum((2, 3)) + F.pad(x, (2, 1, 0, 3), mode="replicate").sum((2, 3))
                  + F.pad(x, (1, 1, 2, 0), mode="circular").sum((2, 3)) + F.pad(x, (1, 1), value=2.0).sum((2, 3)), [IMG], FLOATS[:2]),
    "interpolate_nearest": (lambda x: F.interpolate(x, scale_factor=2, mode="nearest")[:, :, ::3, ::2] + 0, [IMG], FLOATS[:2]),
    "interpolate_nearest_size": (lambda x: F.interpolate(x, size=(4, 11), mode="nearest"), [IMG], FLOATS[:2]),
    "interpolate_bilinear": (lambda x: F.interpolate(x, size=(9, 5), mode="bilinear", align_corners=False), [IMG], FLOATS[:2]),
    "interpolate_bilinear_corners": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True), [IMG], FLOATS[:2]),
    "adaptive_avg_pool_sizes": (lambda x: F.adaptive_avg_pool2d(x, (4, 3)).sum() + F.adaptive_avg_pool2d(x, 5) + F.adaptive_avg_pool2d(x, (1, 7)).mean(), [IMG], FLOATS[:2]),
    "vector_norm": (lambda a: torch.linalg.vector_norm(a, dim=1) + F.normalize(a, dim=0)[0] .sum() + torch.linalg.vector_norm(a, 1, dim=0)[:3], [X], FLOATS[:2]),
    "as_strided": (lambda a: torch.as_strided(a * 1, (2, 2), (5, 1), 1) + torch.as_strided(a * 1, (2, 2), (1, 5)), [X], FLOATS),
    "in_place_slice": (lambda a: _slice_update(a), [X], FLOATS),
}


def _setitem(a, b):
    a = a.clone()
    a[1] = b[0]
    a[:, 1:3] = 0.5
    a[IDX[:2]] = b[:2] * 2
    return a


def _mask_setitem(a):
    a = a.clone()
    a[a > 0.5] = 0.25
    a[a[:, :, 0] < 0] = -1.0
    a[a.sum(2) > 1] = 2
    return a


def _sort_nan_ties(a):
    """Values and indices of a stable sort with NaNs and repeated values."""
    a = torch.where(a > 1.2, float("nan"), torch.round(a * 2))
    up, down = torch.sort(a, stable=True, dim=1), torch.sort(a, stable=True, dim=1, descending=True)
    return torch.cat([up[0], down[0], up[1].to(a.dtype), down[1].to(a.dtype)], 0).nan_to_num(-99.0)


def _slice_update(a):
    a = a * 1
    a[:, 2:].mul_(2)
    a[0].add_(1)
    return a


INT_CASES = {
    "int_arith": (lambda a, b: a * b + a - b * 3 + (a // b) + torch.remainder(a, b) + a.abs() + torch.sign(a), [I, J]),
    "int_floor_divide_negative": (lambda a, b: torch.div(a, b, rounding_mode="floor") + torch.div(a, -b, rounding_mode="floor") * 100, [I, J]),
    "int_trunc_divide": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), [I, J]),
    "int_compare_where": (lambda a, b: torch.where(a > b, a, b) + (a == b).long() + torch.maximum(a, b), [I, J]),
    "int_bitwise": (lambda a, b: (a & b) + (a | b) * 3 + (a ^ b) * 7 + (~a), [I, J]),
    "int_cumsum_argmax": (lambda a, b: torch.cumsum(a, 1) + a.argmax(1, keepdim=True) + torch.cumsum(a > 0, 0), [I, J]),
    "int_sort_topk": (lambda a, b: torch.sort(a, 1, descending=True)[0] + torch.topk(b, 2)[0].sum(), [I, J]),
    "int_index_put_repeated_non_adjacent": (lambda a, b: a.index_put((IDX[:3],), b) + (a[:, :, None] * torch.tensor([1, 2]))[IDX[:2], 1:3, torch.tensor([1, 0])].sum(),
                                            [I, J]),
    "int_index_roll_stack": (lambda a, b: a[IDX[:3]] + torch.roll(b, 1, 0) + torch.stack([a, b]).sum(0) + a.triu(), [I, J]),
    "bool_logic": (lambda p, q: (p & q) | (p ^ ~q) | torch.logical_xor(p, q) & torch.logical_not(p) | torch.logical_or(p, q) & torch.logical_and(p, q), [B, ~B.t()[:3, :3].repeat(1, 2)[:, :5]]),
    "bool_arith": (lambda p, q: p.sum(1) + (p.long() * 3 + q.long()).sum(0).max() + torch.where(p, 2, -1).sum(), [B, ~B]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_op(name, capfd):
    fn, inputs, dtypes = CASES[name]
    for dtype in dtypes:
        args = [a.to(dtype) for a in inputs]
        want = fn(*[a.clone() for a in args])
        c = lt.compile(fn)
        got = c(*[a.clone() for a in args])
        assert got.dtype == want.dtype and got.shape == want.shape, (dtype, got.dtype, want.dtype)
        tol = 1e-3 if dtype in (torch.float32, torch.float64) else 2e-2
        close(got.float(), want.float(), tol)
        err = capfd.readouterr().err
        assert c.function is not None and "eager" not in err, (dtype, err)


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_integer_op(name, capfd):
    fn, inputs = INT_CASES[name]
    for dtype in ([torch.int64, torch.int32] if inputs[0].dtype != torch.bool else [torch.bool]):
        args = [a.to(dtype) for a in inputs]
        want = fn(*[a.clone() for a in args])
        c = lt.compile(fn)
        got = c(*[a.clone() for a in args])
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (dtype, got, want)
        err = capfd.readouterr().err
        assert c.function is not None and "eager" not in err, (dtype, err)
