"""python3 -m latch.bench: the plot of its table (bar heights worked by hand, gaps marked with
their reason, the caption), each cell checked against eager (a wrong output and a fallback
are marked, not timed), one thread count for every mode (the torch._lazy child included),
one small end-to-end run writing --json, --svg and --png, and --tiny-only."""
import json
import os
import subprocess
import sys

import pytest
import torch

import latch
from latch.bench import __main__ as bench
from latch.bench import modes as M
from latch.bench.plot import draw

OK = lambda ms: {"status": "ok", "ms": ms}  # noqa: E731


def bars(fig):
    """gid -> (bottom, top) of each bar drawn for a cell."""
    return {p.get_gid(): (p.get_y(), p.get_y() + p.get_height()) for p in fig.axes[0].patches if p.get_gid()}


def test_plot_heights_gaps_and_caption():
    rows = [{"model": "m", "batch": 1, "size": 8,
             "cells": {"eager": OK(10.0), "latch_lazy": {"status": "differs"}, "latch_compile": OK(5.0),
                       "jit": OK(400.0)}}]
    fig = draw(rows, ["eager", "jit", "latch_lazy", "latch_compile"], "cpu X, 3 threads for every mode, torch 1.13")
    b = bars(fig)
    # heights relative to eager: eager 1x (empty bar at 1), latch_compile 5/10 = 0.5x (a bar
    # from 1 down to 0.5), jit 40x clipped to the axis' 10x; the differing cell a gap
    assert b["bar-0-eager"] == (1.0, 1.0)
    assert b["bar-0-latch_compile"] == pytest.approx((1.0, 0.5))
    assert b["bar-0-jit"] == pytest.approx((1.0, 10.0))
    assert "gap-0-latch_lazy" in b and "bar-0-latch_lazy" not in b
    texts = [t.get_text() for t in fig.axes[0].texts] + [t.get_text() for t in fig.texts]
    assert "differs" in texts and "cpu X, 3 threads for every mode, torch 1.13" in texts


def test_no_eager_figure_makes_every_cell_a_gap():
    rows = [{"model": "m", "batch": 1, "size": 8, "cells": {"eager": {"status": "failed"}, "latch_compile": OK(1.0)}}]
    b = bars(draw(rows, ["eager", "latch_compile"], ""))
    assert set(b) == {"gap-0-eager", "gap-0-latch_compile"}


def test_a_wrong_output_is_marked_not_timed(monkeypatch):
    """latch_compile made to return eager's output plus 1: the cell differs and has no median."""
    real = M.build

    def off_by_one(mode, *args, **kwargs):
        step = real(mode, *args, **kwargs)
        run = step.run
        step.run = lambda: run() + 1
        return step
    monkeypatch.setattr(M, "build", off_by_one)
    module, args, training, want = bench.setup("train_mlp", 2, 8)
    cell = bench.measure("latch_compile", module, args, training, "train_mlp", want, 3)
    assert cell["status"] == "differs" and cell["ms"] is None and cell["first_ms"] > 0


def test_a_fallback_is_marked_not_timed():
    """logcumsumexp: an op latch does not lower (not cumsum: latch lazy says so once per
    process, and test_models.py looks for that line)."""
    class Op(torch.nn.Module):
        def forward(self, x):
            return torch.logcumsumexp(x, 1)
    x = torch.ones(2, 3)
    for mode in ("latch_compile", "latch_lazy"):
        cell = bench.measure(mode, Op(), (x,), False, "op", [torch.logcumsumexp(x, 1)] * 2, 3)
        assert cell["status"] == "fallback" and cell["ms"] is None and "logcumsumexp" in cell["note"], cell


def test_checked_cells_are_timed_with_first_call_and_compile():
    module, args, training, want = bench.setup("train_mlp", 5, 8)  # a batch no other test compiles
    for mode in ("eager", "latch_compile"):
        cell = bench.measure(mode, module, args, training, "train_mlp", want, 3)
        assert cell["status"] == "ok" and cell["ms"] > 0 and cell["first_ms"] > 0, cell
    assert cell["compile_ms"] > 0  # latch compiled the training step on its first call (a new graph)


def test_child_gets_the_threads():
    """The isolated child reports the thread counts it ran with: the parent's --threads."""
    code = ("import sys, torch, latch\nfrom latch.bench.__main__ import use_threads\nuse_threads(3)\n"
            "import subprocess\nout = subprocess.run([sys.executable, '-c', 'import os, torch, latch; "
            "print(os.environ[\"LATCH_THREADS\"], os.environ[\"OMP_NUM_THREADS\"])'], capture_output=True, text=True)\n"
            "print(torch.get_num_threads(), latch.config.threads, out.stdout.strip())")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert run.stdout.split() == ["3", "3", "3", "3"], run.stderr


def test_bench_writes_json_svg_and_png(tmp_path):
    out_json, out_svg, out_png = tmp_path / "b.json", tmp_path / "b.svg", tmp_path / "b.png"
    cmd = [sys.executable, "-m", "latch.bench", "--models", "train_mlp", "--batch", "1", "--sizes", "small",
           "--modes", "eager,jit,latch_compile", "--repeat", "2", "--threads", "1", "--clock", "cpu", "--json", str(out_json),
           "--svg", str(out_svg), "--png", str(out_png)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    result = json.loads(out_json.read_text())
    (row,) = result["rows"]
    cells = row["cells"]
    assert row["model"] == "train_mlp" and cells["eager"]["status"] == "ok" and cells["latch_compile"]["ms"] > 0
    assert cells["jit"]["status"] == "n/a"  # jit.trace runs no training step: a marked gap
    assert result["threads"] == 1 and result["torch"] == torch.__version__ and result["clock"] == "cpu"
    assert "1 threads for every mode, torch" in run.stdout and "cpu time" in run.stdout and "first call ms / compile ms" in run.stdout
    assert out_svg.read_text().lstrip().startswith("<?xml") and "gap-0-jit" in out_svg.read_text()
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_mode_is_an_error():
    run = subprocess.run([sys.executable, "-m", "latch.bench", "--modes", "eager,fast"], capture_output=True,
                         text=True, env=dict(os.environ))
    assert run.returncode == 2 and "unknown mode 'fast'" in run.stderr


def test_tiny_only_times_each_trace_once_mode(tmp_path):
    out_json = tmp_path / "t.json"
    run = subprocess.run([sys.executable, "-m", "latch.bench", "--tiny-only", "--json", str(out_json)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    tiny = json.loads(out_json.read_text())["tiny"]
    assert sorted(tiny) == ["eager_us", "jit_us", "latch_compile_execute_us", "latch_compile_us"]
    assert all(v > 0 for v in tiny.values())
    assert "tiny function x + 1 per call: eager_us" in run.stdout
