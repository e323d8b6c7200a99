"""LATCH_CHECK=eager, or compile(options={"check": "eager"}): each compiled aten graph's
first call is compared with eager PyTorch (the forward and, on the autograd path, the
backward's gradients); a mismatch (made here by LATCH_FAULT, which scales one HLO op's
results) prints the first differing aten op and writes a repro.py a PyTorch user can run.
Without a mismatch nothing is written."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import latch.torch as lt


def run(script, tmp_path, **env):
    env = dict(os.environ, LATCH_REPRO_DIR=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def test_forward_mismatch_names_the_op_and_writes_a_runnable_repro(tmp_path):
    out = run("""
        import math, torch, latch.torch as lt
        c = lt.compile(lambda x: torch.cos(x * 2) + 1)
        x = torch.tensor([0, math.pi / 6, math.pi / 4, math.pi / 2])
        print(" ".join(f"{v:.4f}" for v in c(x).tolist()))
    """, tmp_path, LATCH_CHECK="eager", LATCH_FAULT="accuracy:cosine:0.5")
    assert out.stdout.split() == ["3.0000", "2.2500", "1.5000", "1.0000"]  # 1 + 1.5 cos(2x): the fault, reported
    lines = [l for l in out.stderr.splitlines() if "check eager" in l]
    assert len(lines) == 1 and "first differing op: aten.cos.default" in lines[0], out.stderr
    (repro,) = os.listdir(tmp_path)
    assert sorted(os.listdir(tmp_path / repro)) == ["difference.txt", "graph.pt", "hlo", "inputs.pt", "repro.py"]
    again = subprocess.run([sys.executable, str(tmp_path / repro / "repro.py")], capture_output=True, text=True,
                           env=dict(os.environ, LATCH_FAULT="accuracy:cosine:0.5"), timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "output 0: largest difference 1.0"  # |0.5 cos 0 - cos 0| + ... at x = 0


def test_backward_mismatch_is_found_in_the_gradients(tmp_path):
    out = run("""
        import torch, latch.torch as lt
        c = lt.compile(lambda x: torch.sin(x).sum())
        x = torch.tensor([0.0, 1.0], requires_grad=True)
        c(x).backward()
        print(x.grad.tolist())
    """, tmp_path, LATCH_CHECK="eager", LATCH_FAULT="accuracy:cosine:0.5")
    lines = [l for l in out.stderr.splitlines() if "check eager" in l]
    assert len(lines) == 1 and ".backward" in lines[0] and "aten.cos.default" in lines[0], out.stderr


def test_matching_graphs_write_nothing(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("LATCH_REPRO_DIR", str(tmp_path))
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    c = lt.compile(m, options={"check": "eager"})
    x = torch.randn(2, 4)
    c(x).sum().backward()
    with torch.no_grad():
        c(x)
    assert os.listdir(tmp_path) == []
    assert "check eager" not in capfd.readouterr().err


def test_check_takes_eager_or_off():
    with pytest.raises(ValueError, match="options\\['check'\\] must be 'eager' or 'off'"):
        lt.compile(lambda x: x, options={"check": "accuracy"})


def test_configure_check_eager_after_import(tmp_path):
    """latch.configure(check="eager") before the runtime opens, latch.torch already imported:
    the compiled functions made after it check; the library opens with its own checks off."""
    out = run("""
        import torch, latch, latch.torch as lt
        latch.configure(check="eager")
        c = lt.compile(lambda x: torch.cos(x * 2) + 1)
        c(torch.tensor([0.0, 1.0]))
        print(latch.config.check, latch.stats()["check_failures"])
    """, tmp_path, LATCH_FAULT="accuracy:cosine:0.5")
    assert out.stdout.split() == ["eager", "0"]
    lines = [l for l in out.stderr.splitlines() if "check eager" in l]
    assert len(lines) == 1 and "first differing op: aten.cos.default" in lines[0], out.stderr


def test_configure_refuses_an_unknown_check(tmp_path):
    out = run("""
        import latch
        try:
            latch.configure(check="eagre")
        except ValueError as e:
            print(e)
    """, tmp_path)
    assert "'eagre' is not one of accuracy, compile, eager, off" in out.stdout


def ops(path):
    graph = torch.load(path)
    return [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]


def test_a_backend_fault_is_minified_to_its_op_with_an_hlo_repro(tmp_path):
    """A fault in latch's backend (LATCH_FAULT scales every cosine's results): the minifier
    shrinks the nine-op graph to the cosine alone, and the child run under
    LATCH_CHECK=accuracy, where the backend and the reference evaluator differ, leaves the
    library's HLO repro of it in hlo/."""
    out = run("""
        import torch, latch.torch as lt
        def f(x, w):
            a = torch.relu(x @ w)
            b = torch.cos(a * 2) + 1
            return torch.tanh(b).sum(1) * 3, a.mean()
        lt.compile(f)(torch.randn(4, 5), torch.randn(5, 3))
    """, tmp_path, LATCH_CHECK="eager", LATCH_FAULT="accuracy:cosine:0.5")
    (repro,) = os.listdir(tmp_path)
    where = tmp_path / repro
    assert ops(where / "graph.pt") == ["aten.cos.default"]
    line = (where / "difference.txt").read_text().strip()
    assert line in out.stderr and "first differing op: aten.cos.default" in line
    assert "minified from 9 to 1 ops" in line, line
    (hlo,) = os.listdir(where / "hlo")
    assert f"HLO repro in {where / 'hlo' / hlo}" in line
    assert "cosine" in (where / "hlo" / hlo / "repro.hlo").read_text()


def test_a_wrong_lowering_is_named_and_has_no_hlo_repro(tmp_path):
    """A lowering planted wrong (1 - x lowered as x + 1): the first differing op is rsub, the
    minified graph is the rsub alone, and the HLO, which latch's backend and reference
    evaluator agree on, gives no HLO repro: the line says the lowering differs."""
    out = run("""
        import torch, latch.torch as lt
        from latch.torch import lowering
        add = lowering.LOWERINGS[torch.ops.aten.add.Tensor]
        lowering.LOWERINGS[torch.ops.aten.rsub.Scalar] = lambda a, b, alpha=1: add(a, b)
        lowering._install()
        def f(x):
            return torch.tanh(1 - torch.exp(x)).sum() * 2
        lt.compile(f)(torch.randn(3, 4))
    """, tmp_path, LATCH_CHECK="eager")
    (repro,) = os.listdir(tmp_path)
    where = tmp_path / repro
    assert ops(where / "graph.pt") == ["aten.rsub.Scalar"]
    assert not (where / "hlo").exists()
    line = (where / "difference.txt").read_text().strip()
    assert "first differing op: aten.rsub.Scalar" in line and "the lowering from aten differs" in line, line
