"""latch.torch.lazy training: LazyModule is an nn.Module whose parameters are the wrapped
module's, backward() puts gradients on those parameters (accumulated as eager does), and 10
optimizer steps give eager's parameters on a twin of the module."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import latch.torch as lt
from conftest import close


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 3))


def batch(model, step):
    g = torch.Generator().manual_seed(step)
    if isinstance(model[0], nn.Conv2d):
        return torch.randn(5, 3, 8, 8, generator=g), torch.randint(0, 3, (5,), generator=g)
    return torch.randn(5, 8, generator=g), torch.randint(0, 4, (5,), generator=g)


def test_lazy_module_is_a_module_over_the_same_parameters():
    m = mlp()
    lazy = lt.lazy.module(m)
    assert isinstance(lazy, nn.Module)
    assert [id(p) for p in lazy.parameters()] == [id(p) for p in m.parameters()]


def test_backward_lands_on_the_module_parameters_and_accumulates():
    m = mlp()
    twin = copy.deepcopy(m)
    lazy = lt.lazy.module(twin)
    for step in range(2):
        x, y = batch(m, step)
        F.cross_entropy(m(x), y).backward()
        F.cross_entropy(lazy(lt.lazy.tensor(x)), lt.lazy.tensor(y)).backward()
    for p, q in zip(m.parameters(), twin.parameters()):
        assert type(q.grad) is torch.Tensor
        close(q.grad, p.grad)


@pytest.mark.parametrize("build", [mlp, cnn], ids=["mlp", "cnn"])
@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
], ids=["sgd_momentum", "adam"])
def test_ten_lazy_steps_match_eager(build, make_opt):
    m = build()
    twin = copy.deepcopy(m)
    lazy = lt.lazy.module(twin)
    opt, opt_lazy = make_opt(m.parameters()), make_opt(lazy.parameters())
    for step in range(10):
        x, y = batch(m, step)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        opt_lazy.zero_grad()
        F.cross_entropy(lazy(lt.lazy.tensor(x)), lt.lazy.tensor(y)).backward()
        opt_lazy.step()
    for p, q in zip(m.parameters(), twin.parameters()):
        close(q, p, tol=1e-3 * 10)  # the accuracy rule scaled by the step count


def test_training_batch_norm_runs_in_latch_and_writes_its_running_statistics():
    """Batch norm in .train() through lazy mode: the batch statistics and the running-statistics
    update are latch ops (nothing runs eagerly), and after 10 SGD steps the parameters and the
    running mean, variance and batch count equal eager's."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(256, 3))
    twin = copy.deepcopy(m)
    lazy = lt.lazy.module(twin)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    opt_lazy = torch.optim.SGD(lazy.parameters(), lr=0.1, momentum=0.9)
    eager_before = sum(lt.lazy.eager_ops.values())
    for step in range(10):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(5, 3, 8, 8, generator=g), torch.randint(0, 3, (5,), generator=g)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        opt_lazy.zero_grad()
        F.cross_entropy(lazy(lt.lazy.tensor(x)), lt.lazy.tensor(y)).backward()
        opt_lazy.step()
    assert sum(lt.lazy.eager_ops.values()) == eager_before, lt.lazy.eager_ops  # no op ran eagerly
    for (name, a), b in zip(m.state_dict().items(), twin.state_dict().values()):
        assert type(b) is torch.Tensor, name
        close(b.double(), a.double(), tol=1e-3 * 10)
    assert twin[1].num_batches_tracked.item() == 10
