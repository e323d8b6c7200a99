"""latch.torch.compile(..., options={"precision": "bf16"}): f32 models' products on bf16
operands summed in f32, as torch.autocast; the expected values are worked here in float64 from
operands rounded to bf16 by torch, and the eager check's wider bf16 tolerance."""
import pytest
import torch

from torch.fx.experimental.proxy_tensor import make_fx

import latch.torch
from latch.torch import check


def rounded(t):
    return t.bfloat16().double()


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.GELU(), torch.nn.Linear(384, 96)).eval()


def autocast_like(m, x):
    """m's forward in float64 with each Linear's operands rounded to bf16 first."""
    h = rounded(x) @ rounded(m[0].weight).T + m[0].bias.double()
    h = torch.nn.functional.gelu(h.float()).double()
    return rounded(h.float()) @ rounded(m[2].weight).T + m[2].bias.double()


def bound(k, magnitudes):
    """f32 accumulation of k products: k * 2**-24 times their summed magnitudes."""
    return k * 2.0 ** -24 * magnitudes + 1e-6


def test_linear_layers_in_bf16():
    m, x = mlp(), torch.randn(48, 256)
    with torch.no_grad():
        got = latch.torch.compile(m, options={"precision": "bf16"})(x)
        want = autocast_like(m, x)
        exact = m(x).double()
    assert got.dtype == torch.float32
    # the second layer's sums of magnitudes bound its f32 rounding; the GELU between is f32 exact
    h = torch.nn.functional.gelu((rounded(x) @ rounded(m[0].weight).T + m[0].bias.double()).float())
    mags = rounded(h).abs() @ rounded(m[2].weight).abs().T
    assert ((got.double() - want).abs() <= bound(384, mags) + 1e-4 * want.abs()).all()
    assert (got.double() - exact).abs().max() > 1e-3  # the operands were rounded


def test_f32_default_is_exact():
    m, x = mlp(), torch.randn(8, 256)
    with torch.no_grad():
        got = latch.torch.compile(m)(x)
        assert (got - m(x)).abs().max() < 1e-4


def test_convolution_in_bf16():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1, bias=False).eval()
    x = torch.randn(2, 8, 12, 12)
    with torch.no_grad():
        got = latch.torch.compile(conv, options={"precision": "bf16"})(x)
        want = torch.nn.functional.conv2d(rounded(x), rounded(conv.weight), padding=1)
        mags = torch.nn.functional.conv2d(rounded(x).abs(), rounded(conv.weight).abs(), padding=1)
    assert ((got.double() - want).abs() <= bound(72, mags)).all()


def test_bad_precision_is_refused():
    with pytest.raises(ValueError, match="precision"):
        latch.torch.compile(mlp(), options={"precision": "fp8"})


def test_eager_check_tolerance(tmp_path, monkeypatch):
    """A bf16 result passes the check at the bf16 precision and fails it at f32; an error well
    past bf16's rounding fails at both."""
    monkeypatch.setenv("LATCH_REPRO_DIR", str(tmp_path))
    m, x = mlp(), torch.randn(16, 256)
    with torch.no_grad():
        gm = make_fx(m)(x)  # an aten graph, as the check gets it
    with torch.no_grad():
        got = latch.torch.compile(m, options={"precision": "bf16"})(x)
    assert check.tolerance("bf16", 384) == pytest.approx(check.tolerance("f32", 384) + 2.0 ** -8 * 384 ** 0.5)
    assert check.compare("bf16-ok", gm, [x], [got], "bf16") is None
    assert check.compare("bf16-as-f32", gm, [x], [got], "f32") is not None
    assert check.compare("bf16-wrong", gm, [x], [got * 1.5], "bf16") is not None
