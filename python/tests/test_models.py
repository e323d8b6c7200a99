"""The model list through latch.torch.compile and latch.torch.lazy at small sizes, against
eager PyTorch (the full sizes run in `python3 -m latch.bench`)."""
import copy

import pytest
import torch

import latch.torch as lt
from latch import models
from conftest import close

INFERENCE = ["resnet18", "mobilenet_v2", "squeezenet1_1", "alexnet", "vit_b_16", "bert_layer", "gpt2_block"]


@pytest.mark.parametrize("name", INFERENCE)
def test_compile_matches_eager(name):
    m, make = models.build(name, models.MODELS[name][2])
    (x,) = make(2, models.MODELS[name][2])
    c = lt.compile(m)
    with torch.no_grad():
        want = m(x)
        close(c(x), want)
        close(c(x), want)
    assert c.eager_reason is None and c.stats()["hits"] == 1


@pytest.mark.parametrize("name", ["resnet18", "bert_layer", "gpt2_block"])
def test_lazy_matches_eager(name):
    m, make = models.build(name, models.MODELS[name][2])
    (x,) = make(2, models.MODELS[name][2])
    lazy = lt.lazy.module(m)
    with torch.no_grad():
        want = m(x)
        for _ in range(2):
            y = lazy(lt.lazy.tensor(x))
            lt.mark_step()
            close(y.cpu(), want)


def test_lazy_training_step():
    m, make = models.build("train_cnn", 16)
    twin = copy.deepcopy(m)
    lazy = lt.lazy.module(twin)
    for step in range(2):
        x, y = make(4, 16, seed=step)
        loss = lazy(lt.lazy.tensor(x), lt.lazy.tensor(y))
        lt.mark_step()
        lazy.write_back()
        close(loss.item(), m(x, y).item())
        for p, q in zip(m.parameters(), twin.parameters()):
            close(q, p)


def test_lazy_reads_sync():
    x = lt.lazy.tensor(torch.tensor([1.0, 2.0, 3.0]))
    y = (x * 2 + 1).sum()
    assert y.item() == 15.0
    z = x * x
    assert z.tolist() == [1.0, 4.0, 9.0]
    assert z.numpy().tolist() == [1.0, 4.0, 9.0]
    assert "4." in repr(z)
    assert z.to("cpu").tolist() == [1.0, 4.0, 9.0]


def test_lazy_unlowered_op_runs_eagerly(capfd):
    x = lt.lazy.tensor(torch.tensor([1.0, 2.0, 3.0]))
    close(torch.special.i0(x * 2), torch.special.i0(torch.tensor([2.0, 4.0, 6.0])))
    assert "aten.i0.default is not lowered" in capfd.readouterr().err
