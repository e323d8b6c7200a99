"""latch.torch.compile's torch.compile front (decorator forms, modes, options, fullgraph,
disable, errors at the compile call), the nn.Module wrapper sharing the original's
parameters (state_dict, load_state_dict, train/eval, to, hooks, torch.save), the backend on
GraphModules from make_fx and symbolic_trace, explain and stats, and importing latch.torch
without torch."""
import io
import os
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import latch
import latch.torch as lt
from conftest import close


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


X = torch.linspace(-1, 1, 24).reshape(3, 8)


# ---- the signature ----

def test_decorator_without_and_with_arguments():
    @lt.compile
    def double(x):
        return x * 2

    @lt.compile(dynamic=True, mode="reduce-overhead")
    def inc(x):
        return x + 1

    assert double(torch.ones(3)).tolist() == [2.0] * 3
    assert inc(torch.ones(2)).tolist() == [2.0] * 2
    assert double.stats()["traces"] == 1 and inc.stats()["traces"] == 1


def test_unknown_keyword_mode_and_option_fail_at_compile():
    with pytest.raises(TypeError, match="unexpected keyword argument 'backend_x'"):
        lt.compile(mlp(), backend_x="x")
    with pytest.raises(ValueError, match="unknown mode 'fastest'; modes: 'default', 'reduce-overhead', 'max-autotune'"):
        lt.compile(mlp(), mode="fastest")
    with pytest.raises(ValueError, match="unknown option 'unroll'"):
        lt.compile(mlp(), options={"unroll": 4})
    with pytest.raises(ValueError, match=r"options\['trace'\] must be one of"):
        lt.compile(mlp(), options={"trace": "sometimes"})
    with pytest.raises(ValueError, match="unknown mode 'fastest'"):  # the decorator form checks at once too
        lt.compile(mode="fastest")


def test_disable_returns_the_model_itself():
    m = mlp()
    assert lt.compile(m, disable=True) is m
    fn = lambda x: x  # noqa: E731
    assert lt.compile(disable=True)(fn) is fn


@pytest.mark.parametrize("mode,traces", [("default", 2), ("reduce-overhead", 3), ("max-autotune", 3)])
def test_modes_shape_policies(mode, traces):
    """Batches 2, 3, 4: default makes the batch symbolic at its first change (two traces);
    reduce-overhead and max-autotune specialize each size (three)."""
    c = lt.compile(lambda x: x.sum(1), mode=mode)
    for n in (2, 3, 4):
        assert c(torch.ones(n, 5)).tolist() == [5.0] * n
    assert c.stats()["traces"] == traces


def test_trace_every_option_traces_each_call():
    c = lt.compile(lambda x: x + 1, options={"trace": "every", "name": "inc"})
    for _ in range(3):
        assert c(torch.zeros(2)).tolist() == [1.0, 1.0]
    assert c.stats()["traces"] == 3 and c.name == "inc"


def test_recompile_limit_option():
    """A limit of 1: the third shape is past it, so that call traces every time."""
    c = lt.compile(lambda x: x * 3, dynamic=False, options={"recompile_limit": 1})
    for n in (1, 2, 3, 3):
        assert c(torch.ones(n)).tolist() == [3.0] * n
    assert c.stats()["trace_every"]


def test_fullgraph_raises_where_it_would_fall_back(capfd):
    c = lt.compile(lambda x: torch.special.i0(x), fullgraph=True)
    with pytest.raises(latch.Unsupported, match="fullgraph=True.*i0"):
        c(torch.ones(3))
    assert "running it eagerly" not in capfd.readouterr().err
    loose = lt.compile(lambda x: torch.special.i0(x * 0))
    close(loose(torch.ones(3)), [1.0] * 3)  # i0(0) = 1


# ---- the module wrapper ----

def test_wrapper_shares_parameters_and_state_dict_keys():
    m = mlp()
    c = lt.compile(m)
    assert isinstance(c, torch.nn.Module) and c._orig_mod is m
    assert [id(p) for p in c.parameters()] == [id(p) for p in m.parameters()]
    assert list(c.state_dict()) == list(m.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with torch.no_grad():
        close(c(X), m(X))
    fresh = mlp()
    for p in fresh.parameters():
        torch.nn.init.constant_(p, 0.25)
    c.load_state_dict(fresh.state_dict())  # into the original's tensors
    assert torch.equal(m[0].weight, torch.full((16, 8), 0.25))
    with torch.no_grad():
        close(c(X), fresh(X))  # the new values, without a new trace
    assert c.stats()["traces"] == 1
    m.note = "kept"
    assert c.note == "kept" and getattr(c, "2") is m[2]  # attributes the wrapper lacks: the original's


def test_train_eval_reach_the_original():
    m = mlp()
    c = lt.compile(m)
    c.train()
    assert m.training and m[0].training
    c.eval()
    assert not m.training and not m[0].training


def test_forward_hook_on_the_wrapper_runs():
    c = lt.compile(mlp())
    seen = []
    c.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    with torch.no_grad():
        c(X)
    assert seen == [(3, 4)]


def test_to_another_dtype_is_seen():
    """to(float64) replaces the original's parameters; the next call guards them and traces
    again, with float64 results equal to eager's."""
    m = mlp()
    c = lt.compile(m)
    with torch.no_grad():
        c(X)
        c.to(torch.float64)
        out = c(X.double())
        close(out, m(X.double()))
    assert out.dtype == torch.float64 and c.stats()["traces"] == 2


def test_module_on_a_device_latch_does_not_run_says_so():
    c = lt.compile(torch.nn.Linear(2, 2).to("meta"))
    with pytest.raises(ValueError, match="device.*meta.*CPU tensors only"):
        c(torch.ones(1, 2))


def test_torch_save_and_load():
    m = mlp()
    c = lt.compile(m, mode="max-autotune")
    with torch.no_grad():
        want = c(X)
    buf = io.BytesIO()
    torch.save(c, buf)
    buf.seek(0)
    back = torch.load(buf)
    assert isinstance(back, lt.OptimizedModule) and back._latch_settings["recompile_limit"] == 64
    with torch.no_grad():
        close(back(X), want)
    assert back.stats()["traces"] == 1


# ---- the backend ----

def test_backend_on_make_fx_graph():
    m = mlp()
    gm = make_fx(m)(X)
    run = lt.backend(gm, [X])
    with torch.no_grad():
        close(run(X), m(X))
        close(run(X * 2), m(X * 2))
    assert run.stats()["hits"] == 1


def test_backend_on_symbolic_trace_graph_with_tuple_output():
    class Two(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x @ y), (x - 1).sum(0)

    gm = torch.fx.symbolic_trace(Two())
    x, y = torch.randn(4, 3), torch.randn(3, 5)
    run = lt.backend(gm, [x, y])
    got, want = run(x, y), gm(x, y)
    assert isinstance(got, tuple) and len(got) == 2
    close(got[0], want[0])
    close(got[1], want[1])


def test_backend_falls_back_to_the_graph_module(capfd):
    gm = torch.fx.symbolic_trace(lambda x: torch.special.i0(x * 0) * 2)
    run = lt.backend(gm, [torch.ones(3)])
    close(run(torch.ones(3)), [2.0] * 3)  # i0(0) = 1
    assert "aten.i0.default is not lowered" in capfd.readouterr().err


# ---- explain and stats ----

def test_explain_whole_and_fallback(capsys):
    whole = lt.explain(mlp(), X)
    assert whole["verdict"] == "whole" and whole["unlowered"] == {}
    assert whole["ops"]["aten.addmm.default"] == 2 and whole["ops"]["aten.relu.default"] == 1
    split = lt.explain(lambda x: torch.special.i0(x) + torch.special.i0(x), torch.ones(3))
    assert split["verdict"] == "fallback" and split["unlowered"] == {"aten.i0.default": 2}
    assert any("i0" in r for r in split["reasons"])
    out = capsys.readouterr().out
    assert "Sequential: whole" in out and "not lowered: aten.i0.default (2x)" in out


def test_explain_captures_as_compile_does():
    """explain sees compile's graph: in-place activations functionalized, hardswish
    decomposed, a buffer's in-place update a write-back; nothing unlowered, verdict whole."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.act = torch.nn.Hardswish(inplace=True)
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):
            self.calls.add_(1)
            return torch.nn.functional.silu(self.act(self.conv(x)), inplace=True)

    r = lt.explain(Block().eval(), torch.randn(1, 3, 8, 8), verbose=False)
    assert r["verdict"] == "whole" and r["unlowered"] == {}, r
    assert not any(op.split(".")[1].endswith("_") and op != "aten.copy_.default" for op in r["ops"]), r["ops"]
    assert "aten.hardswish.default" not in r["ops"] and r["ops"]["aten.copy_.default"] == 1, r["ops"]


def test_explain_wrong_device_and_non_tensor_argument():
    assert lt.explain(torch.nn.Linear(2, 2).to("meta"), torch.ones(1, 2), verbose=False)["verdict"] == "error"
    r = lt.explain(lambda x, k: x * k, torch.ones(2), 3, verbose=False)
    assert r["verdict"] == "fallback" and "non-tensor" in r["reasons"][0]


def test_stats_has_cache_and_function_counters():
    before = lt.stats()
    c = lt.compile(lambda x: x * 5 - 1, options={"name": "stats_probe"})
    for _ in range(3):
        c(torch.ones(2))
    s = lt.stats()
    assert s["functions"]["stats_probe"]["traces"] == 1 and s["functions"]["stats_probe"]["hits"] == 2
    assert s["syncs"] - before["syncs"] >= 3 and "cache_hits" in s and "compiles" in s


# ---- import ----

def test_import_without_torch_says_what_to_install():
    code = "import sys; sys.modules['torch'] = None\nimport latch.torch"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode != 0 and "install python3-torch" in run.stderr
