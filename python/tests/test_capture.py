"""latch.torch's capture (latch/torch/capture.py): in-place ops through functionalization and
their write-backs into arguments and buffers, ops reached through decompositions, partial
graphs around an op latch does not lower, and inputs as PyTorch passes them (expected values:
eager PyTorch on the same inputs)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import latch.torch as lt
from conftest import close


def test_in_place_update_of_an_argument_is_written_back():
    def f(x, y):
        x.add_(1)
        return y * 2

    c = lt.compile(f)
    x, y = torch.zeros(3), torch.arange(3.0)
    assert c(x, y).tolist() == [0.0, 2.0, 4.0] and x.tolist() == [1.0] * 3
    assert c(x, y).tolist() == [0.0, 2.0, 4.0] and x.tolist() == [2.0] * 3
    assert c.function is not None and c.stats()["traces"] == 1


def test_in_place_update_of_a_buffer_is_written_back():
    class Count(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(2))

        def forward(self, x):
            self.seen.add_(x.sum(0))
            return x * 2

    m = Count()
    c = lt.compile(m)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    close(c(x), x * 2)
    close(c(x), x * 2)
    assert m.seen.tolist() == [8.0, 12.0]  # twice the column sums 4 and 6


def test_in_place_activations_compile_whole(capfd):
    def f(x):
        return F.silu(x * 1, inplace=True) + F.hardswish(x * 2, inplace=True) + F.relu6(x * 3, inplace=True)

    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    c = lt.compile(f)
    close(c(x), f(x))
    assert c.function is not None, capfd.readouterr().err
    assert "eager" not in capfd.readouterr().err


def test_in_place_update_of_a_non_contiguous_argument():
    def f(x):
        x.mul_(2)
        return x + 1

    base = torch.arange(6.0).reshape(2, 3)
    x = base.t()
    out = lt.compile(f)(x)
    assert base.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert out.tolist() == (base.t() + 1).tolist()


def test_numpy_array_is_named():
    c = lt.compile(lambda x: x + 1)
    with pytest.raises(TypeError, match="numpy array"):
        c(np.ones(3, dtype=np.float32))


def test_complex_input_runs_eagerly_with_the_reason(capfd):
    c = lt.compile(lambda x: x * 2)
    z = torch.tensor([1 + 2j, 3 - 1j])
    assert c(z).tolist() == [2 + 4j, 6 - 2j]
    assert "dtype torch.complex64 has no latch type" in capfd.readouterr().err
    assert c(torch.ones(2)).tolist() == [2.0, 2.0]


def test_zero_size_batch_has_eager_shape():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    c = lt.compile(m)
    with torch.no_grad():
        close(c(torch.ones(2, 4)), m(torch.ones(2, 4)))
        assert c(torch.ones(0, 4)).shape == (0, 3)
        close(c(torch.ones(3, 4)), m(torch.ones(3, 4)))
