"""Every aten op latch.torch lowers, through latch.torch.compile and through latch.torch.lazy
(whose common ops the extension makes in C, python/src/dispatch.c), against eager PyTorch on
small seeded inputs (expected values: PyTorch's own eager kernels)."""
import pytest
import torch
import torch.nn.functional as F

import latch.torch as lt
from latch.torch.lowering import LOWERINGS
from conftest import close

g = torch.Generator().manual_seed(0)
A = torch.randn(3, 4, generator=g)
B = torch.randn(3, 4, generator=g)
M = torch.randn(4, 5, generator=g)
IMG = torch.randn(2, 3, 8, 8, generator=g)
W = torch.randn(4, 3, 3, 3, generator=g)
SEQ = torch.randn(2, 5, 8, generator=g)

CASES = {
    "add": (lambda a, b: a + b * 2 - 1, A, B),
    "sub_rsub_mul_div": (lambda a, b: (1 - a) * b / (b.abs() + 1), A, B),
    "unary": (lambda a: a.exp() + a.abs().sqrt() + a.tanh() + a.sigmoid() + a.sin() + a.cos() + torch.erf(a), A),
    "log_rsqrt_neg": (lambda a: -(a.abs() + 1).log() + torch.rsqrt(a.abs() + 1), A),
    "pow_max_min": (lambda a, b: torch.maximum(a, b) ** 2 + torch.minimum(a, b), A, B),
    "compare_where": (lambda a, b: torch.where(a > b, a, b) + (a <= 0).float() + (a == a).float(), A, B),
    "masked_fill": (lambda a: a.masked_fill(a < 0, -1.0), A),
    "relu_clamp_gelu": (lambda a: F.relu(a) + F.hardtanh(a, -0.5, 0.5) + F.gelu(a) + F.gelu(a, approximate="tanh"), A),
    "relu6_inplace": (lambda a: F.relu6(a * 4, inplace=True), A),
    "hardtanh_default_bounds": (lambda a: torch.ops.aten.hardtanh.default(a * 4), A),  # -1 and 1
    "inplace_ops": (lambda a, b: (a * 1).add_(b).mul_(b).clamp_(-0.5, 0.5).sigmoid_(), A, B),
    "mm_addmm_linear": (lambda a, m: F.linear(a, m.t(), m[0]) + (a @ m).sum(), A, M),
    "bmm_matmul": (lambda x: x @ x.transpose(1, 2), SEQ),
    "softmax": (lambda x: torch.softmax(x, -1) + torch.log_softmax(x, 1).exp(), SEQ),
    "layer_norm": (lambda x: F.layer_norm(x, (8,), torch.ones(8) * 2, torch.zeros(8) + 0.5), SEQ),
    "conv": (lambda x, w: F.conv2d(x, w, torch.ones(4), stride=2, padding=1), IMG, W),
    "conv_groups_dilation": (lambda x: F.conv2d(x, torch.ones(3, 1, 3, 3), groups=3, dilation=2), IMG),
    "batch_norm": (lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3) * 2, torch.ones(3), torch.zeros(3)), IMG),
    "max_pool": (lambda x: F.max_pool2d(x, 3, 2, 1), IMG),
    "max_pool_ceil": (lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), IMG),
    "avg_pool": (lambda x: F.avg_pool2d(x, 2), IMG),
    "adaptive_pool": (lambda x: F.adaptive_avg_pool2d(x, 3) + F.adaptive_avg_pool2d(x, 4).mean(), IMG),
    "reductions": (lambda x: x.mean((2, 3)) + x.sum(1).amax(-1, keepdim=True).mean() + x.sum(), IMG),
    "shapes": (lambda x: x.flatten(1).reshape(2, -1, 4).permute(2, 0, 1).transpose(0, 1).unsqueeze(0).squeeze(0)
               .contiguous().view(-1), IMG),
    "slice_select_cat_split": (lambda x: torch.cat([x[:, 1:3], x[:, 0:1].expand(2, 2, 8, 8)] + list(x.split(1, 1)), 1)
                               [:, :, 0, ::2], IMG),
    "tril_ones_arange": (lambda x: x + torch.ones(5, 5).tril()[:, :1].t() * torch.arange(5).float(), SEQ[0, :, :5]),
    "embedding": (lambda t, i: F.embedding(i, t), M, torch.tensor([[0, 3], [2, 1]])),
    "cross_entropy": (lambda a, y: F.cross_entropy(a, y), A, torch.tensor([0, 3, 1])),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), IMG),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name):
    fn, *args = CASES[name]
    want = fn(*[a.clone() for a in args])
    compiled = lt.compile(fn)
    got = compiled(*[a.clone() for a in args])
    assert compiled.eager_reason is None, compiled.eager_reason
    close(got, want)
    close(compiled(*[a.clone() for a in args]), want)  # the cached entry
    assert compiled.stats()["hits"] == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_lazy(name, capfd):
    fn, *args = CASES[name]
    want = fn(*[a.clone() for a in args])
    got = fn(*[lt.lazy.tensor(a.clone()) for a in args])
    lt.mark_step()
    got = [g.cpu() for g in got] if isinstance(got, (tuple, list)) else got.cpu()
    assert "is not lowered" not in capfd.readouterr().err
    if isinstance(got, list):
        for a, b in zip(got, want):
            close(a, b)
    else:
        close(got, want)


def test_lazy_dispatch_errors():
    """An op on a tensor latch cannot take raises, naming why; an unknown overload is refused."""
    import latch
    x = lt.lazy.tensor(torch.ones(2, 3))
    with pytest.raises(latch.Error, match="matmul"):
        torch.mm(x, lt.lazy.tensor(torch.ones(2, 3)))
    with pytest.raises(latch.Error, match="matmul"):  # latch_sync reports the thread's failed op once more
        lt.mark_step()
    lt.mark_step()
    with pytest.raises(latch.Unsupported, match="not lowered"):
        latch._latch.lower(torch.ops.aten.i0.default, (x.lt,), None)


def test_backward_ops():
    """The training ops (threshold, log-softmax, nll, convolution and pooling backward)."""
    x = IMG.clone().requires_grad_()
    w = W.clone().requires_grad_()

    def step(x, w):
        y = F.avg_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2).mean((2, 3))
        loss = F.cross_entropy(y, torch.tensor([1, 2]))
        return torch.autograd.grad(loss, [x, w])

    want = step(x, w)
    compiled = lt.compile(step)
    got = compiled(x, w)
    assert compiled.eager_reason is None, compiled.eager_reason
    for a, b in zip(got, want):
        close(a, b)


def test_every_lowering_is_an_aten_overload():
    assert len(LOWERINGS) > 100
    for op in LOWERINGS:
        assert isinstance(op, torch._ops.OpOverload), op
