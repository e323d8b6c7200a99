"""python3 -m latch.bench: per model, at batch 1 and 8 and at a small size and 224x224 (128
tokens for the transformer blocks), ms per step of PyTorch eager, torch.jit.trace, torch._lazy
(TorchScript backend), latch lazy (trace every) and latch compile (trace once), with each
mode's first call and compile time; the trace-once / trace-every speedup per model and its
geomean; the per-op trace cost of both lazy modes; the per-call time of each trace-once mode
on a tiny function. --json FILE writes every figure; --svg FILE and --png FILE draw the table
(matplotlib); --tiny-only measures the tiny function alone.

Fair by construction: every cell runs in a process of its own (see isolated), with the same
--threads (default: the machine's cores): PyTorch's intra-op threads and latch's LATCH_THREADS. Every cell's
output is compared with eager PyTorch's on the same weights and inputs (two steps, so a
training step's update is checked too); a cell whose output differs, or whose mode fell back
(latch ran an op or the model eagerly, or traced every call), is marked and not timed.

  python3 -m latch.bench [--models a,b] [--batch 1,8] [--sizes small,full] [--repeat N]
                         [--modes eager,...] [--threads N] [--clock wall|cpu] [--json FILE]
                         [--svg FILE] [--png FILE] [--tiny-only]"""
import argparse
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

import latch
from latch import models
from . import modes as M

INFERENCE = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16", "vit_b_16", "bert_layer",
             "gpt2_block"]
TOL = 1e-3  # latch's accuracy rule (LATCH_CHECK_TOL), scaled by the output's magnitude


def use_threads(n):
    """The one thread count of every mode in this process and its children; before the latch
    runtime opens (it reads LATCH_THREADS once)."""
    torch.set_num_threads(n)
    latch.config.threads = n
    os.environ["OMP_NUM_THREADS"] = str(n)


def machine():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]  # --clock: the medians' clock (first calls and compiles stay wall time)


def median_ms(step, repeat, budget_s=20.0):
    samples, start = [], time.perf_counter()
    for _ in range(repeat):
        t = clock()
        step()
        samples.append((clock() - t) * 1e3)
        if time.perf_counter() - start > budget_s and len(samples) >= 3:
            break
    return statistics.median(samples)


def max_error(got, want):
    """The largest difference over the scale of want's values (0 is equal; > TOL differs)."""
    got, want = torch.as_tensor(got).detach().double(), torch.as_tensor(want).detach().double()
    if got.shape != want.shape:
        return math.inf
    if not want.numel():
        return 0.0
    return (got - want).abs().max().item() / (1 + want.abs().max().item())


def setup(name, batch, size):
    """The module, its inputs, and eager's outputs of two steps (on a copy for a training
    step, which updates its module)."""
    module, make = models.build(name, size)
    args = make(batch, size)
    training = name.startswith("train_")
    with torch.no_grad() if not training else torch.enable_grad():
        ref_module = copy.deepcopy(module) if training else module
        want = [ref_module(*args).detach().clone() for _ in range(2)]
    return module, args, training, want


def measure(mode, module, args, training, name, want, repeat):
    """One cell: status ("ok", "differs", "fallback", "failed", "n/a"), the median ms (ok
    cells only), the first call's ms and the compile ms (latch's compile time during the
    first call; jit.trace's time; None where the mode does not say)."""
    cell = {"status": "ok", "ms": None, "first_ms": None, "compile_ms": None}
    try:
        with torch.no_grad() if not training else torch.enable_grad():
            latch_mode = mode in M.LATCH_MODES  # only those open latch's runtime
            compile_before = latch.stats()["compile_ns"] if latch_mode else 0
            t = time.perf_counter()
            step = M.build(mode, module, args, training, name)
            built = time.perf_counter() - t
            if step is None:
                return dict(cell, status="n/a", note="does not run this model")
            t = time.perf_counter()
            got = [step.run()]
            cell["first_ms"] = (time.perf_counter() - t) * 1e3
            if latch_mode:
                cell["compile_ms"] = (latch.stats()["compile_ns"] - compile_before) / 1e6
            elif mode == "jit":
                cell["compile_ms"] = built * 1e3
            got.append(step.run())
            reason = step.fell_back()
            if reason:
                return dict(cell, status="fallback", note=reason)
            err = max(max_error(g, w) for g, w in zip(got, want))
            if err > TOL:
                return dict(cell, status="differs", note=f"max error {err:.3g} (scaled) against eager")
            cell["ms"] = median_ms(step.run, repeat)
    except Exception as e:  # a peer that cannot run this model: said, not fatal
        return dict(cell, status="failed", note=f"{type(e).__name__}: {str(e)[:200]}")
    return cell


def child(mode, name, batch, size, repeat):
    """One cell in this process (run by isolated), printed as JSON; at batch 1 the lazy
    modes' us per aten op of tracing alone."""
    module, args, training, want = setup(name, batch, size)
    out = {"cell": measure(mode, module, args, training, name, want, repeat)}
    if batch == 1 and mode in ("torch_lazy", "latch_lazy") and not training and out["cell"]["status"] == "ok":
        out.update(per_op_cost(name, size, 5, [mode]))
    print("LATCH_BENCH_CHILD " + json.dumps(out))


def isolated(mode, name, batch, size, repeat, threads, clock_name):
    """child() in a new process with the same threads and clock. Every cell runs so: a mode
    that aborts the process (torch._lazy on some models) costs one cell, not the run; each
    latch mode starts with an empty compile cache, so its first call and compile time are its
    own; and PyTorch's modes run in a process where latch never opened its runtime (which
    sets OpenBLAS, shared with torch, to one thread)."""
    cmd = [sys.executable, "-m", "latch.bench", "--child", f"{mode},{name},{batch},{size}", "--repeat", str(repeat),
           "--threads", str(threads), "--clock", clock_name]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    for line in run.stdout.splitlines():
        if line.startswith("LATCH_BENCH_CHILD "):
            return json.loads(line.split(" ", 1)[1])
    tail = (run.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return {"cell": {"status": "failed", "ms": None, "first_ms": None, "compile_ms": None,
                     "note": f"exit {run.returncode}: {tail}"}}


def run_model(name, batch, size, modes, repeat, threads, clock_name):
    row = {"model": name, "batch": batch, "size": size, "cells": {}}
    for mode in modes:
        got = isolated(mode, name, batch, size, repeat, threads, clock_name)
        row["cells"][mode] = got.pop("cell")
        row.update(got)  # the per-op trace cost, when measured
    once, every = (row["cells"].get(m, {}).get("ms") for m in ("latch_compile", "latch_lazy"))
    row["once_vs_every"] = every / once if once and every else None
    return row


def per_op_cost(name, size, repeat, modes):
    """us per aten op of tracing alone (no sync), each lazy mode, batch 1."""
    module, make = models.build(name, size)
    args = make(1, size)
    ops = M.count_aten_ops(module, args)
    out = {"aten_ops": ops}
    for mode in modes:
        with torch.no_grad():
            trace, drop = M.trace_only(mode, module, args)
            samples = []
            for i in range(repeat + 1):
                t = time.perf_counter()
                trace()
                dt = time.perf_counter() - t
                drop()
                if i:
                    samples.append(dt)
        out[mode + "_us_per_op"] = statistics.median(samples) * 1e6 / ops
    return out


def tiny_overhead(repeat=20000):
    """us per call of x + 1 on one element: eager, jit.trace, latch compile (and its execute)."""
    x = torch.ones(1)
    fn = lambda x: x + 1  # noqa: E731
    calls = {"eager": fn, "jit": torch.jit.trace(fn, (x,)), "latch_compile": latch.torch.compile(fn)}
    out = {}
    for mode, f in calls.items():
        for _ in range(100):
            f(x)
        before = latch.stats()["execute_ns"]
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(repeat // 5):
                f(x)
            samples.append((time.perf_counter() - t) * 1e6 / (repeat // 5))
        out[mode + "_us"] = statistics.median(samples)
        if mode == "latch_compile":
            out["latch_compile_execute_us"] = (latch.stats()["execute_ns"] - before) / 1e3 / repeat
    return out


def print_tiny(tiny):
    print("tiny function x + 1 per call: " + ", ".join(f"{k} {v:.2f} us" for k, v in tiny.items()))


def tiny_only(json_path):
    tiny = tiny_overhead()
    print_tiny(tiny)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"tiny": tiny}, f, indent=1)
    return 0


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _median_text(cell):
    return f"{cell['ms']:.2f}" if cell["status"] == "ok" else cell["status"]


def _first_text(cell):
    if cell.get("first_ms") is None:
        return "-"
    compile_ms = cell.get("compile_ms")
    return f"{cell['first_ms']:.0f}/" + (f"{compile_ms:.0f}" if compile_ms is not None else "-")


def print_table(rows, modes, text=_median_text, last=True, head=True):
    if head:
        print(f"{'model':<14} {'batch':>5} {'size':>5} " + " ".join(f"{m:>13}" for m in modes) +
              ("  once/every" if last else ""))
    for r in rows:
        cells = " ".join(f"{text(r['cells'][m]):>13}" for m in modes)
        sp = f"{r['once_vs_every']:.2f}x" if r["once_vs_every"] else "-"
        print(f"{r['model']:<14} {r['batch']:>5} {r['size']:>5} {cells}" + (f"  {sp:>9}" if last else ""))


def speedups(rows):
    """The trace-once / trace-every geomean at batch 1, small and full sizes: over the models
    whose two latch cells are both ok (the rest are listed as left out)."""
    out = {}
    for kind, index in (("small", 2), ("full", 3)):
        picked = [r for r in rows if r["batch"] == 1 and r["size"] == models.MODELS[r["model"]][index]]
        if kind == "full":
            picked = [r for r in picked if models.MODELS[r["model"]][2] != models.MODELS[r["model"]][3]]
        used = [r for r in picked if r["once_vs_every"]]
        out[kind] = {"geomean": geomean([r["once_vs_every"] for r in used]), "models": [r["model"] for r in used],
                     "left_out": [r["model"] for r in picked if not r["once_vs_every"]]}
    return out


def report(rows, modes, result):
    print("\nms per step (median; a mark where the cell was not timed):")
    print_table(rows, modes)
    print("\nfirst call ms / compile ms:")
    print_table(rows, modes, _first_text, last=False)
    for kind, s in result["geomean_once_vs_every_batch1"].items():
        if s["geomean"]:
            left = f"; left out (a latch cell not ok): {', '.join(s['left_out'])}" if s["left_out"] else ""
            print(f"trace once / trace every (latch compile vs latch lazy), geomean at batch 1, {kind} size: "
                  f"{s['geomean']:.2f}x over {len(s['models'])} models{left}")
    costs = [r for r in rows if r.get("torch_lazy_us_per_op") and r.get("latch_lazy_us_per_op")]
    for c in costs:
        print(f"per-op trace cost, {c['model']} {c['size']} ({c['aten_ops']} aten ops): torch lazy "
              f"{c['torch_lazy_us_per_op']:.2f} us, latch lazy {c['latch_lazy_us_per_op']:.2f} us")
    if costs:
        t, l = geomean([c["torch_lazy_us_per_op"] for c in costs]), geomean([c["latch_lazy_us_per_op"] for c in costs])
        print(f"per-op trace cost, geomean: torch lazy {t:.2f} us, latch lazy {l:.2f} us")
    for r in rows:
        for mode, cell in r["cells"].items():
            if cell["status"] not in ("ok",):
                print(f"{r['model']} batch {r['batch']} size {r['size']}: {mode} {cell['status']}: {cell.get('note', '')}")
    print_tiny(result["tiny"])
    print(result["caption"])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m latch.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(INFERENCE + ["train_mlp", "train_cnn"]))
    p.add_argument("--batch", default="1,8")
    p.add_argument("--sizes", default="small,full", help="small, full (224 / 128 tokens), or numbers")
    p.add_argument("--modes", default=",".join(M.MODES))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="threads of every mode: PyTorch's, latch's and the torch._lazy child's (default: the cores)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="the medians' clock: wall time, or this process's CPU time (every thread's: what a step "
                        "cost apart from waiting for a core on a shared machine)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--json")
    p.add_argument("--svg")
    p.add_argument("--png")
    p.add_argument("--tiny-only", action="store_true", help="only the per-call time on the tiny function")
    a = p.parse_args(argv)
    if a.threads < 1:
        p.error(f"--threads must be at least 1, not {a.threads}")
    use_threads(a.threads)
    global clock
    clock = CLOCKS[a.clock]
    if a.child:
        mode, name, batch, size = a.child.split(",")
        return child(mode, name, int(batch), int(size), a.repeat)
    if a.tiny_only:
        return tiny_only(a.json)
    names, modes = a.models.split(","), a.modes.split(",")
    for n in names:
        if n not in models.MODELS:
            p.error(f"unknown model '{n}'; models: {', '.join(models.MODELS)}")
    for m in modes:
        if m not in M.MODES:
            p.error(f"unknown mode '{m}'; modes: {', '.join(M.MODES)}")
    caption = (f"{machine()}, {a.threads} threads for every mode, torch {torch.__version__}, {a.clock} time; "
               "outputs checked against eager")
    print(caption)
    rows = []
    for name in names:
        _, _, small, full = models.MODELS[name]
        sizes = sorted({small if s == "small" else full if s == "full" else int(s) for s in a.sizes.split(",")})
        for size in sizes:
            for batch in map(int, a.batch.split(",")):
                rows.append(run_model(name, batch, size, modes, a.repeat, a.threads, a.clock))
                print_table(rows[-1:], modes, head=len(rows) == 1)
                sys.stdout.flush()
    result = {"rows": rows, "geomean_once_vs_every_batch1": speedups(rows), "tiny": tiny_overhead(),
              "threads": a.threads, "clock": a.clock, "machine": machine(), "torch": torch.__version__, "caption": caption}
    report(rows, modes, result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.svg or a.png:
        from .plot import draw
        figure = draw(rows, modes, caption)
        for path in (a.svg, a.png):
            if path:
                figure.savefig(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
