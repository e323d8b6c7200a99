"""pytest setup for latch's Python tests: the package from the build (PYTHONPATH set by
tests/test_python.sh) and the accuracy rule shared by every comparison with eager PyTorch."""
import torch


def close(got, want, tol=1e-3):
    """latch's accuracy rule (LATCH_CHECK_TOL's 1e-3), scaled by the values' magnitude: fp32
    kernels summing in another order differ by rounding, which grows with the values."""
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    assert got.shape == want.shape, (got.shape, want.shape)
    err = (got - want).abs().max().item() if want.numel() else 0.0
    assert err <= tol * (1 + want.abs().max().item()), f"max error {err}"
