"""latch.torch.compile: guards (dtype, shape, stride, device, a new parameter, an in-place
version), batch sweeps under latch's shape policy, the eager fallback and its message,
errors, and LATCH_CHECK from Python."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import latch
import latch.torch as lt
from latch import models
from conftest import close


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


def test_hit_after_trace():
    m = mlp()
    c = lt.compile(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        close(c(x), m(x))
        close(c(x * 2), m(x * 2))
    s = c.stats()
    assert (s["traces"], s["hits"], s["entries"]) == (1, 1, 1)


def test_dtype_guard_retraces():
    c = lt.compile(lambda x: x * 2)
    c(torch.ones(4))
    out = c(torch.ones(4, dtype=torch.float64))
    assert out.dtype == torch.float64 and out.tolist() == [2.0] * 4
    assert c.stats()["traces"] == 2


def test_shape_guard_static():
    c = lt.compile(lambda x: x.sum(0), dynamic=False)
    for n in (2, 3, 4):
        assert c(torch.ones(n, 3)).tolist() == [float(n)] * 3
    assert c.stats()["traces"] == 3


def test_batch_sweep_two_compiles():
    """latch's automatic policy: batch 1 static, the first other batch makes it symbolic."""
    m = mlp()
    c = lt.compile(m)
    before = latch.stats()["compiles"]
    with torch.no_grad():
        for batch in range(1, 65):
            x = torch.randn(batch, 8)
            close(c(x), m(x))
    s = c.stats()
    assert s["traces"] == 2, s
    assert latch.stats()["compiles"] - before <= 2


@pytest.mark.parametrize("dynamic,traces", [(None, 3), (True, 2), (False, 6)])
def test_dynamic_policies(dynamic, traces):
    """Shapes (3,4) (5,4) (7,4) (5,6) (5,7) (2,7). None: static first, then dim 0 changes (a
    second trace, dim 0 symbolic), then dim 1 (a third). True: dim 0 symbolic from the
    first trace, dim 1 changes once (a second). False: one trace per shape."""
    c = lt.compile(lambda x: x.sum(1), dynamic=dynamic)
    for shape in [(3, 4), (5, 4), (7, 4), (5, 6), (5, 7), (2, 7)]:
        assert c(torch.ones(shape)).tolist() == [float(shape[1])] * shape[0]
    assert (c.stats()["traces"], c.stats()["entries"]) == (traces, traces)


def test_dynamic_true_batch_sweep_one_trace():
    """dynamic=True: a 2..64 batch sweep is one trace (None takes two: see above)."""
    m = mlp()
    c = lt.compile(m, dynamic=True)
    with torch.no_grad():
        for batch in range(2, 65):
            x = torch.randn(batch, 8)
            close(c(x), m(x))
    assert c.stats()["traces"] == 1, c.stats()


def test_dynamic_must_be_none_or_a_bool():
    with pytest.raises(ValueError, match="dynamic must be None, True or False"):
        lt.compile(lambda x: x, dynamic="yes")


def test_train_cnn_batch_sweep():
    """A training step over changing batches: two traces, symbolic batch, eager's values."""
    import copy
    m, make = models.build("train_cnn", 8)
    twin = copy.deepcopy(m)
    c = lt.compile(twin)
    for batch in (2, 3, 5, 8):
        args = make(batch, 8, seed=batch)
        close(c(*args), m(*args))
    assert c.stats()["traces"] == 2, c.stats()
    for p, q in zip(m.parameters(), twin.parameters()):
        close(q, p)


def test_non_contiguous_input_is_made_contiguous():
    c = lt.compile(lambda x: x + 1)
    x = torch.arange(12.0).reshape(4, 3)
    assert c(x.t()).tolist() == (x.t() + 1).tolist()
    assert c(x).tolist() == (x + 1).tolist()


def test_other_device_runs_eagerly(capfd):
    c = lt.compile(lambda x: x + 1)
    out = c(torch.ones(3, device="meta"))
    assert out.device.type == "meta" and out.shape == (3,)
    assert "a tensor on device meta (latch takes CPU tensors): that call runs eagerly" in capfd.readouterr().err
    assert c(torch.ones(3)).tolist() == [2.0] * 3


def test_new_parameter_is_seen():
    m = mlp()
    c = lt.compile(m)
    x = torch.randn(2, 8)
    with torch.no_grad():
        c(x)
        m[2].weight = torch.nn.Parameter(torch.randn(4, 16))
        close(c(x), m(x))
    assert c.stats()["traces"] == 1  # same shapes: the same entry, the new tensor lent


def test_in_place_update_is_seen():
    m = mlp()
    c = lt.compile(m)
    x = torch.randn(2, 8)
    with torch.no_grad():
        first = c(x).clone()
        for p in m.parameters():
            p.mul_(0.5)  # a new version, the same memory
        close(c(x), m(x))
        assert not torch.allclose(first, m(x))


def test_optimizer_step_between_calls():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    c = lt.compile(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    x = torch.randn(3, 4)
    for _ in range(3):
        with torch.no_grad():
            close(c(x), m(x))
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()


@pytest.mark.parametrize("name", ["train_mlp", "train_cnn"])
def test_training_step_matches_eager(name):
    import copy
    m, make = models.build(name, models.MODELS[name][2])
    twin = copy.deepcopy(m)
    c = lt.compile(twin)
    for step in range(3):
        args = make(4, models.MODELS[name][2], seed=step)
        close(c(*args), m(*args))
        for p, q in zip(m.parameters(), twin.parameters()):
            close(q, p)
    assert c.stats()["traces"] == 1


def test_unlowered_op_runs_between_compiled_parts(capfd):
    def f(x):
        return torch.special.i0(x * 2) + 1

    c = lt.compile(f)
    x = torch.arange(4.0)
    want = (torch.special.i0(x * 2) + 1).tolist()
    close(c(x), want)
    close(c(x + 0), want)
    err = capfd.readouterr().err
    assert err.count("aten.i0.default is not lowered: it runs eagerly, 2 compiled parts around") == 1, err
    assert c.function is None and c.eager_reason is None


def test_failed_trace_runs_eagerly_with_the_reason(capfd):
    def f(x):
        return x + 1 if x.sum() > 0 else x - 1

    c = lt.compile(f)
    assert c(torch.ones(3)).tolist() == [2.0] * 3
    assert c(-torch.ones(3)).tolist() == [-2.0] * 3
    err = capfd.readouterr().err
    assert err.count("the trace failed (RuntimeError: It appears that you're trying to get value out of a tracing") == 1, err


def test_recompile_limit_from_the_environment():
    script = textwrap.dedent("""
        import torch, latch.torch as lt
        c = lt.compile(lambda x: x.sum(0), dynamic=False)
        for n in range(2, 8):
            assert c(torch.ones(n, 2)).tolist() == [float(n)] * 2
        print(c.stats()["fallback_calls"] > 0, c.stats()["entries"])
    """)
    env = dict(os.environ, LATCH_RECOMPILE_LIMIT="2", LATCH_LOG="recompiles")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "3"]
    assert "recompile" in out.stderr


@pytest.mark.parametrize("fault", ["compile:cosine", "accuracy:cosine:0.5"])
def test_latch_check_writes_a_repro(tmp_path, fault):
    script = textwrap.dedent("""
        import math, torch, latch, latch.torch as lt
        c = lt.compile(lambda x: torch.cos(x * 2) + 1)
        x = torch.tensor([0, math.pi / 6, math.pi / 4, math.pi / 2])
        print(" ".join(f"{v:.4f}" for v in c(x).tolist()))
        print(latch.last_repro())
    """)
    env = dict(os.environ, LATCH_CHECK="accuracy", LATCH_FAULT=fault, LATCH_REPRO_DIR=str(tmp_path),
               LATCH_BACKEND="reference")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    values, repro = out.stdout.split("\n")[:2]
    assert values == "2.0000 1.5000 1.0000 0.0000"  # cos of 0, pi/3, pi/2, pi, plus one
    assert repro.startswith(str(tmp_path))
    files = os.listdir(repro)
    assert "repro.hlo" in files and any(f.endswith(".npy") for f in os.listdir(os.path.join(repro, "inputs"))), files
    assert "cosine(" in open(os.path.join(repro, "repro.hlo")).read()
