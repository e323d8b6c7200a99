"""Autograd through latch.torch.compile (AOTAutograd, latch compiling the forward and the
backward graph): gradients, accumulation, retain_graph, autograd.grad, two forwards before
one backward, no_grad inference, the errors PyTorch gives, training-mode layers (batch norm
with its running statistics, dropout from latch's seeded graph random numbers, layer norm,
embedding, cross-entropy with ignore_index and label smoothing) and optimizer steps, each
compared with eager PyTorch on a twin of the module."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import latch.torch as lt
from conftest import close


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def data(seed=1, n=5):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randint(0, 4, (n,), generator=g)


def grads_close(a, b, tol=1e-3):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            close(q.grad, p.grad, tol)


def twins(m):
    twin = copy.deepcopy(m)
    return twin, lt.compile(twin)


def test_backward_puts_gradients_on_parameters():
    m = mlp()
    twin, c = twins(m)
    x, y = data()
    F.cross_entropy(m(x), y).backward()
    out = c(x)
    assert out.grad_fn is not None
    F.cross_entropy(out, y).backward()
    grads_close(m, twin)
    assert c.eager_reason is None


def test_product_with_a_leaf_reaches_the_parameters():
    m = mlp()
    twin, c = twins(m)
    x, _ = data()
    w = torch.randn(5, 4)
    (m(x) * w).sum().backward()
    (c(x) * w).sum().backward()
    grads_close(m, twin)


def test_accumulation_over_calls():
    m = mlp()
    twin, c = twins(m)
    for seed in (1, 2, 3):
        x, y = data(seed)
        F.cross_entropy(m(x), y).backward()
        F.cross_entropy(c(x), y).backward()
    grads_close(m, twin)


def test_two_forwards_then_one_backward():
    m = mlp()
    twin, c = twins(m)
    (x1, y1), (x2, y2) = data(1), data(2)
    (F.cross_entropy(m(x1), y1) + 2 * F.cross_entropy(m(x2), y2)).backward()
    (F.cross_entropy(c(x1), y1) + 2 * F.cross_entropy(c(x2), y2)).backward()
    grads_close(m, twin)


def test_retain_graph_twice():
    m = mlp()
    twin, c = twins(m)
    x, y = data()
    loss = F.cross_entropy(m(x), y)
    loss.backward(retain_graph=True)
    loss.backward()
    loss = F.cross_entropy(c(x), y)
    loss.backward(retain_graph=True)
    loss.backward()
    grads_close(m, twin)


def test_autograd_grad_of_the_input():
    m = mlp()
    twin, c = twins(m)
    x, y = data()
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = torch.autograd.grad(F.cross_entropy(m(x1), y), [x1])[0]
    got = torch.autograd.grad(F.cross_entropy(c(x2), y), [x2])[0]
    close(got, want)
    assert all(p.grad is None for p in twin.parameters())


def test_function_of_inputs_that_require_grad():
    def f(a, b):
        return (a.sin() * b).sum(1).relu()

    c = lt.compile(f)
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    f(a, b).pow(2).sum().backward()
    c(a2, b2).pow(2).sum().backward()
    close(a2.grad, a.grad)
    close(b2.grad, b.grad)


def test_no_grad_inference_has_no_graph():
    m = mlp()
    c = lt.compile(m)
    x, y = data()
    with torch.no_grad():
        out = c(x)
        close(c(x), m(x))
    assert out.grad_fn is None and not out.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        F.cross_entropy(out, y).backward()


def test_double_backward_is_a_clear_error():
    c = lt.compile(lambda a: (a * a * a).sum())
    a = torch.randn(4, requires_grad=True)
    (g,) = torch.autograd.grad(c(a), [a], create_graph=False)
    close(g, 3 * a.detach() ** 2)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(c(a), [a], create_graph=True)


def test_unlowered_op_runs_that_graph_in_pytorch(capfd):
    def f(a):
        return torch.special.i0(a * 2).sum()  # an op latch does not lower

    c = lt.compile(f)
    a = torch.arange(4.0, requires_grad=True)
    for _ in range(2):
        a.grad = None
        c(a).backward()
        close(a.grad, 2 * torch.special.i1(2 * a.detach()))  # i0' = i1
    err = capfd.readouterr().err
    assert err.count("aten.i0.default is not lowered") == 1, err


# ---- training-mode layers ----

def train_twins(m, make, loss_fn, steps=3):
    twin, c = twins(m)
    for step in range(steps):
        args = make(step)
        for p in list(m.parameters()) + list(twin.parameters()):
            p.grad = None
        want = loss_fn(m(*args[:-1]), args[-1])
        want.backward()
        got = loss_fn(c(*args[:-1]), args[-1])
        got.backward()
        close(got, want)
        grads_close(m, twin)
        for name, b in m.named_buffers():
            close(dict(twin.named_buffers())[name], b)
    assert c.eager_reason is None
    return twin, c


def test_batch_norm_training_updates_running_statistics():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                      nn.Flatten(), nn.BatchNorm1d(128), nn.Linear(128, 5))

    def make(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(4, 3, 8, 8, generator=g) * (step + 1), torch.randint(0, 5, (4,), generator=g)

    twin, c = train_twins(m, make, F.cross_entropy)
    assert int(twin[1].num_batches_tracked) == 3
    m.eval(), twin.eval()
    x = make(7)[0]
    with torch.no_grad():
        close(c(x), m(x))  # eval mode now reads the running statistics the training calls wrote


def test_layer_norm_gelu_and_label_smoothing_with_ignore_index():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 5))

    def make(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(6, 8, generator=g), torch.tensor([0, 1, -100, 3, 4, -100])

    train_twins(m, make, lambda out, y: F.cross_entropy(out, y, ignore_index=-100, label_smoothing=0.1))


def test_embedding_backward_adds_repeated_rows():
    class Bag(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 6, padding_idx=0)
            self.out = nn.Linear(6, 3)

        def forward(self, tokens):
            return self.out(self.emb(tokens)).mean(1)

    torch.manual_seed(0)

    def make(step):
        return torch.tensor([[1, 1, 2, 0], [3, 1, 9, 9]]), torch.tensor([0, 2])  # repeats and the padding row

    twin, _ = train_twins(Bag(), make, F.cross_entropy)
    assert twin.emb.weight.grad[0].abs().max().item() == 0.0


def dropout_masks(seed, calls=3):
    torch.manual_seed(seed)
    c = lt.compile(nn.Dropout(0.5).train())
    x = torch.ones(64, requires_grad=True)
    return [c(x).detach() for _ in range(calls)], x, c


def test_dropout_is_seeded_and_backward_uses_its_mask():
    masks, x, c = dropout_masks(0)
    again, _, _ = dropout_masks(0)
    other, _, _ = dropout_masks(1)
    for a, b in zip(masks, again):
        assert torch.equal(a, b)
    assert not torch.equal(masks[0], masks[1])  # each call draws anew
    assert not torch.equal(masks[0], other[0])  # torch.manual_seed before compile changes them
    for m in masks:
        assert set(m.unique().tolist()) <= {0.0, 2.0}  # kept values scaled by 1 / (1 - p)
        assert 10 < int((m == 0).sum()) < 54  # about half dropped (64 draws; 10 is 5 sigma off)
    out = c(x)
    out.sum().backward()
    assert torch.equal(x.grad, out.detach())  # d out_i / d x_i is the mask times 2, and x is ones


def test_transformer_encoder_layer_without_dropout():
    torch.manual_seed(0)
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2)

    def make(step):
        g = torch.Generator().manual_seed(step)
        return torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 16, generator=g)

    train_twins(m, make, F.mse_loss, steps=2)


# ---- optimizer steps on the gradients latch returns ----

@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
    lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, foreach=True),
    lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=True),
    lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=True),
], ids=["sgd_momentum", "adam", "adamw", "sgd_foreach", "adam_foreach", "adamw_foreach"])
def test_ten_optimizer_steps_match_eager(make_opt):
    torch.manual_seed(0)
    # no bias before the batch norm: its gradient would be rounding noise, which Adam's
    # normalization turns into full-size steps in either implementation
    m = nn.Sequential(nn.Linear(8, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    twin, c = twins(m)
    opt, opt_twin = make_opt(m.parameters()), make_opt(twin.parameters())
    for step in range(10):
        x, y = data(step, n=8)
        for model, o in ((m, opt), (c, opt_twin)):
            o.zero_grad()
            F.cross_entropy(model(x), y).backward()
            o.step()
    for p, q in zip(m.parameters(), twin.parameters()):
        close(q, p, tol=1e-3 * 10)  # the accuracy rule scaled by the step count
    for a, b in zip(m.buffers(), twin.buffers()):
        close(b, a, tol=1e-3 * 10)
    assert c.eager_reason is None


@pytest.mark.parametrize("kernel,stride,padding,size", [(3, 2, 1, 8), (3, 2, 1, 9), (1, 2, 0, 8), (7, 2, 3, 16),
                                                         (3, 3, 1, 10), (2, 3, 0, 11)])
def test_strided_convolution_gradients(kernel, stride, padding, size, capfd):
    """The input's gradient too (an even size leaves a row only the last window's high side
    reaches; a kernel smaller than its stride leaves rows no window reads at zero)."""
    torch.manual_seed(0)
    m = nn.Conv2d(3, 4, kernel, stride, padding)
    twin, c = twins(m)
    x = torch.randn(2, 3, size, size)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    weights = torch.randn(m(x).shape)
    (m(x1) * weights).sum().backward()
    (c(x2) * weights).sum().backward()
    close(x2.grad, x1.grad)
    grads_close(m, twin)
    assert "runs in PyTorch" not in capfd.readouterr().err


@pytest.mark.parametrize("stride,padding,dilation,size", [(1, 2, 2, 9), (2, 2, 2, 10), (1, 0, 3, 9)])
def test_dilated_convolution_gradients(stride, padding, dilation, size, capfd):
    """A dilated 3x3 kernel: the input's gradient and the weights' in latch graphs (XLA's
    forms, the dilation read as the window's), as eager's."""
    torch.manual_seed(0)
    m = nn.Conv2d(3, 4, 3, stride, padding, dilation)
    twin, c = twins(m)
    x = torch.randn(2, 3, size, size)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    weights = torch.randn(m(x).shape)
    (m(x1) * weights).sum().backward()
    (c(x2) * weights).sum().backward()
    close(x2.grad, x1.grad)
    grads_close(m, twin)
    assert "runs in PyTorch" not in capfd.readouterr().err


@pytest.mark.parametrize("kernel,stride,padding,size", [(3, 2, 1, 8), (3, 2, 1, 9), (2, 2, 0, 7), (3, 1, 1, 6),
                                                         (1, 2, 0, 7), (3, 3, 1, 10)])
def test_max_pool_gradients(kernel, stride, padding, size, capfd):
    """Each gradient to its window's maximum, overlapping windows adding up; a kernel smaller
    than its stride leaves rows no window reads at zero. Then ties (a constant map): the first
    maximum of each window in row-major order takes it, as PyTorch's CPU kernel does."""
    torch.manual_seed(0)
    m = nn.MaxPool2d(kernel, stride, padding)
    for x in (torch.randn(2, 3, size, size), torch.ones(1, 2, size, size)):
        c = lt.compile(m)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        weights = torch.randn(m(x).shape)
        (m(x1) * weights).sum().backward()
        (c(x2) * weights).sum().backward()
        close(x2.grad, x1.grad)
    assert "runs in PyTorch" not in capfd.readouterr().err


def test_max_pool_gradient_reads_the_input_not_the_indices():
    """In a joint graph the max pool's gradient is made to read the pool's input instead of
    the indices (so the forward computes and saves none): the indices are then unused, and the
    rewritten graph gives eager's gradient, ties included."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from latch.torch import lowering_train
    aten = torch.ops.aten

    def joint(x, g):
        out, indices = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
        return out, aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, indices)

    x = torch.randn(2, 3, 9, 9)
    x[0, 0, :4, :4] = 1.0  # ties
    g = torch.randn(2, 3, 5, 5)
    gm = make_fx(joint)(x, g)
    want = gm(x, g)
    assert lowering_train.drop_pool_indices(gm) == 1
    uses = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is lowering_train.max_pool2d_backward_from_input]
    assert len(uses) == 1 and all(not isinstance(a, torch.fx.Node) or a.op == "placeholder" for a in uses[0].args)
    for got, expected in zip(gm(x, g), want):
        assert torch.equal(got, expected)


def test_lowering_refusal_at_the_trace_runs_that_graph_in_pytorch(capfd):
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2, ceil_mode=True))  # ceil_mode: latch refuses it
    torch.manual_seed(0)
    twin, c = twins(m)
    x = torch.randn(2, 3, 7, 7)
    for _ in range(2):
        m(x).sum().backward()
        c(x).sum().backward()
    grads_close(m, twin)
    err = capfd.readouterr().err
    assert err.count("Sequential.forward: aten.avg_pool2d (ceil_mode") == 1, err  # once, though called twice
    assert err.count("Sequential.backward: aten.avg_pool2d_backward") == 1, err


def test_ceil_mode_max_pool_trains_in_pytorch(capfd):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2, ceil_mode=True))
    twin, c = twins(m)
    x = torch.randn(2, 3, 8, 8)
    for _ in range(2):
        m(x).sum().backward()
        c(x).sum().backward()
    grads_close(m, twin)
    assert "gives no value latch can save for the backward; it runs in PyTorch" in capfd.readouterr().err


def test_the_autograd_path_traces_once_per_input_size():
    """The forward and the backward graph are traced once for a size (two traces) and later
    calls at that size take them; a new batch size traces both again (AOTAutograd traces at
    fixed sizes) and the first size keeps its graphs."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    c = lt.compile(m)
    for batch in (4, 4, 4, 7, 7, 4):
        x = torch.randn(batch, 6)
        m.zero_grad()
        c(x).pow(2).sum().backward()
        got = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        m(x).pow(2).sum().backward()
        for g, p in zip(got, m.parameters()):
            assert torch.allclose(g, p.grad, atol=1e-5)
    stats = c.stats()
    assert stats["traces"] == 4, stats  # forward and backward at 4, then at 7
    assert stats["calls"] == 12, stats  # each of six steps calls the forward and the backward once
