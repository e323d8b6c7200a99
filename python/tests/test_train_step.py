"""A whole training step in one compiled graph (latch/torch/step.py): latch.torch.compile of a
function that runs the forward, the loss, loss.backward() and a torch.optim optimizer's step()
and zero_grad(). After 10 steps the parameters, batch norm's running statistics and the
optimizer's state equal eager PyTorch's on a twin (the accuracy rule, 1e-3 relative, scaled by
the step count); the step traces once and the later calls take the cached graph."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import latch.torch as lt

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd-nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01),
    "adamw-amsgrad": lambda p: torch.optim.AdamW(p, lr=0.01, amsgrad=True),
    # torch.optim's multi-tensor implementations (torch._foreach_* ops) on the eager side
    "sgd-foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, foreach=True),
    "adam-foreach": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01, foreach=True),
    "adamw-foreach": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True),
}


def model():
    torch.manual_seed(0)
    # no bias before the batch norm: its gradient is zero up to rounding, which Adam would
    # scale to a full step of either sign
    return nn.Sequential(nn.Linear(8, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))


def batches(n=10):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)) for _ in range(n)]


def close(a, b, steps):
    return (a - b).abs().max().item() <= 1e-3 * steps * (1 + b.abs().max().item())


def eager_step(m, opt, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()


def same_state(m, twin, opt, opt_twin, steps):
    for (name, a), b in zip(m.state_dict().items(), twin.state_dict().values()):
        assert close(a.double(), b.double(), steps), name
    for p, q in zip(m.parameters(), twin.parameters()):
        for k, v in opt.state[p].items():
            if isinstance(v, torch.Tensor):
                assert close(v, opt_twin.state[q][k], steps), k


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_ten_steps_match_eager(kind):
    m = model()
    twin = copy.deepcopy(m)
    opt, opt_twin = OPTIMIZERS[kind](m.parameters()), OPTIMIZERS[kind](twin.parameters())

    @lt.compile
    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for x, y in batches():
        got, want = step(x, y), eager_step(twin, opt_twin, x, y)
        assert close(got, want, 10)
    same_state(m, twin, opt, opt_twin, 10)
    stats = step.stats()
    # the first call runs eagerly (torch.optim makes its state), the second after zero_grad
    # made the .grad tensors traces, the eight after it take the cached graph
    assert stats["traces"] == 1 and stats["hits"] == 8, stats


def test_zero_grad_first_and_set_to_none():
    m = model()
    twin = copy.deepcopy(m)
    opt, opt_twin = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), \
        torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    c = lt.compile(step)
    for x, y in batches():
        y = F.one_hot(y, 4).float()
        c(x, y)
        opt_twin.zero_grad(set_to_none=True)
        F.mse_loss(twin(x), y).backward()
        opt_twin.step()
    same_state(m, twin, opt, opt_twin, 10)
    assert all(p.grad is not None for p in m.parameters())  # the last backward's, as eager leaves them
    assert c.stats()["traces"] == 1


def test_a_new_learning_rate_traces_again():
    m = model()
    twin = copy.deepcopy(m)
    opt, opt_twin = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    c = lt.compile(lambda x, y: eager_step(m, opt, x, y))
    for i, (x, y) in enumerate(batches()):
        if i == 5:
            for o in (opt, opt_twin):
                o.param_groups[0]["lr"] = 0.02
        c(x, y)
        eager_step(twin, opt_twin, x, y)
    same_state(m, twin, opt, opt_twin, 10)
    assert c.stats()["traces"] == 2


def test_a_step_that_reads_a_value_runs_eagerly(capfd):
    m = model()
    twin = copy.deepcopy(m)
    opt, opt_twin = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)

    def step(x, y):
        return eager_step(m, opt, x, y).item()  # a Python float: a graph cannot return it

    c = lt.compile(step)
    for x, y in batches(4):
        assert c(x, y) == pytest.approx(eager_step(twin, opt_twin, x, y).item(), rel=1e-5)
    assert "reads a tensor's value" in capfd.readouterr().err
    same_state(m, twin, opt, opt_twin, 1)
