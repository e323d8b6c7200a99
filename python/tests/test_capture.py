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


def test_structures_in_and_out():
    def f(xs, d, scale=2.0):
        return {"sum": xs[0] + xs[1] * scale, "pair": (d["a"] * d["b"], d["a"].sum())}

    c = lt.compile(f)
    a, b = torch.arange(3.0), torch.ones(3)
    for scale in (2.0, 2.0, 3.0):
        got, want = c([a, b], {"a": a, "b": b + 1}, scale=scale), f([a, b], {"a": a, "b": b + 1}, scale=scale)
        close(got["sum"], want["sum"])
        close(got["pair"][0], want["pair"][0])
        close(got["pair"][1], want["pair"][1])
    assert c.eager_reason is None and len(c.variants) == 2  # scale 2.0 and 3.0


def test_python_scalar_argument_retraces_on_a_new_value():
    c = lt.compile(lambda x, k: x * k)
    x = torch.arange(3.0)
    assert c(x, 2).tolist() == [0.0, 2.0, 4.0]
    assert c(x, 3).tolist() == [0.0, 3.0, 6.0]
    assert c(x, 2).tolist() == [0.0, 2.0, 4.0]


def test_channels_last_expanded_and_transposed_inputs():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    c = lt.compile(m)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        close(c(x.to(memory_format=torch.channels_last)), m(x))
        close(c(x[:1].expand(2, 3, 8, 8)), m(x[:1].expand(2, 3, 8, 8)))
        close(c(x.transpose(2, 3)), m(x.transpose(2, 3)))
        close(c(x), m(x))


def test_bool_and_integer_inputs():
    c = lt.compile(lambda m, i, x: torch.where(m, x * i, x - i))
    mask = torch.tensor([True, False, True])
    ints = torch.tensor([3, -2, 5])
    x = torch.tensor([1.5, 2.0, -1.0])
    assert c(mask, ints, x).tolist() == [4.5, 4.0, -5.0]


def test_boolean_mask_index_runs_eagerly_and_retraces_on_another_count(capfd):
    """x[mask]'s size depends on the mask's values: it runs eagerly between compiled parts,
    and a call whose mask selects another count traces again (the graph after it read the
    count: a mean over the selected entries)."""
    def f(x, m):
        y = x[m > 0]
        return y.sum() / y.shape[0], x * 2

    g = torch.Generator().manual_seed(3)
    x, m = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    c = lt.compile(f)
    for mask in [m, -m, m, m.abs() + 1]:
        got, want = c(x, mask), f(x, mask)
        close(got[0], want[0], 1e-5)
        assert torch.equal(got[1], want[1])
    err = capfd.readouterr().err
    assert err.count("aten.index.Tensor is not lowered: it runs eagerly, 2 compiled parts around") == 1, err
    assert err.count("a call with another result size traces again") == 1, err
