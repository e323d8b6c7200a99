"""python3 -m latch.bench: per model, at batch 1 and 8 and at a small size and 224x224 (128
tokens for the transformer blocks), ms per step of PyTorch eager, torch.jit.trace, torch._lazy
(TorchScript backend), latch lazy (trace every) and latch compile (trace once); the
trace-once / trace-every speedup per model and its geomean; the per-op trace cost of both
lazy modes; the per-call time of each trace-once mode on a tiny function. --json FILE
writes every figure; --svg FILE draws the table as grouped bars.

  python3 -m latch.bench [--models a,b] [--batch 1,8] [--sizes small,full] [--repeat N]
                         [--modes eager,...] [--threads N] [--json FILE] [--svg FILE]"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

import latch
from latch import models
from . import modes as M
from .svg import bars

INFERENCE = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16", "vit_b_16", "bert_layer",
             "gpt2_block"]


def median_ms(step, repeat, warmup=2, budget_s=20.0):
    for _ in range(warmup):
        step()
    samples, start = [], time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t) * 1e3)
        if time.perf_counter() - start > budget_s and len(samples) >= 3:
            break
    return statistics.median(samples)


def run_model(name, batch, size, modes, repeat):
    module, make = models.build(name, size)
    args = make(batch, size)
    training = name.startswith("train_")
    row = {"model": name, "batch": batch, "size": size, "ms": {}}
    for mode in modes:
        try:
            with torch.no_grad() if not training else torch.enable_grad():
                step = M.build(mode, module, args, training, name)
                row["ms"][mode] = None if step is None else median_ms(step, repeat)
        except Exception as e:  # a peer that cannot run this model: said, not fatal
            row["ms"][mode] = None
            row.setdefault("errors", {})[mode] = f"{type(e).__name__}: {str(e)[:200]}"
    once, every = row["ms"].get("latch_compile"), row["ms"].get("latch_lazy")
    row["once_vs_every"] = every / once if once and every else None
    return row


def per_op_cost(name, size, repeat):
    """us per aten op of tracing alone (no sync), each lazy mode, batch 1."""
    module, make = models.build(name, size)
    args = make(1, size)
    ops = M.count_aten_ops(module, args)
    out = {"model": name, "aten_ops": ops}
    for mode in ("torch_lazy", "latch_lazy"):
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


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def print_table(rows, modes):
    print(f"{'model':<14} {'batch':>5} {'size':>5} " + " ".join(f"{m:>13}" for m in modes) + "  once/every")
    for r in rows:
        cells = " ".join(f"{r['ms'][m]:13.2f}" if r["ms"].get(m) else f"{'-':>13}" for m in modes)
        sp = f"{r['once_vs_every']:.2f}x" if r["once_vs_every"] else "-"
        print(f"{r['model']:<14} {r['batch']:>5} {r['size']:>5} {cells}  {sp:>9}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m latch.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(INFERENCE + ["train_mlp", "train_cnn"]))
    p.add_argument("--batch", default="1,8")
    p.add_argument("--sizes", default="small,full", help="small, full (224 / 128 tokens), or numbers")
    p.add_argument("--modes", default=",".join(M.MODES))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="threads for PyTorch (default: PyTorch's own choice; latch uses LATCH_THREADS, else "
                        "one per core). On a busy 2-core machine PyTorch's OpenMP at 2 threads ran 10-30x slower")
    p.add_argument("--json")
    p.add_argument("--svg")
    a = p.parse_args(argv)
    names, modes = a.models.split(","), a.modes.split(",")
    torch.set_num_threads(a.threads)
    latch_threads = int(os.environ.get("LATCH_THREADS") or 0) or os.cpu_count()
    print(f"threads: PyTorch {torch.get_num_threads()}, latch {latch_threads}")
    for n in names:
        if n not in models.MODELS:
            sys.exit(f"latch.bench: unknown model '{n}'; models: {', '.join(models.MODELS)}")
    rows = []
    for name in names:
        _, _, small, full = models.MODELS[name]
        sizes = sorted({small if s == "small" else full if s == "full" else int(s) for s in a.sizes.split(",")})
        for size in sizes:
            for batch in map(int, a.batch.split(",")):
                rows.append(run_model(name, batch, size, modes, a.repeat))
                print_table(rows[-1:], modes) if len(rows) > 1 else print_table(rows, modes)
                sys.stdout.flush()
    speedups = {}
    for size_kind in ("small", "full"):
        picked = [r["once_vs_every"] for r in rows if r["batch"] == 1 and
                  r["size"] == models.MODELS[r["model"]][2 if size_kind == "small" else 3]]
        speedups[size_kind] = geomean(picked)
    costs = [per_op_cost(n, models.MODELS[n][2], 5) for n in names if "torch_lazy" in modes and
             not n.startswith("train_") and ("torch_lazy", n) not in M.CRASHES]
    tiny = tiny_overhead()
    print("\nall rows:")
    print_table(rows, modes)
    for k, v in speedups.items():
        if v:
            print(f"trace once / trace every (latch compile vs latch lazy), geomean at batch 1, {k} size: {v:.2f}x")
    for c in costs:
        print(f"per-op trace cost, {c['model']} ({c['aten_ops']} aten ops): torch lazy "
              f"{c['torch_lazy_us_per_op']:.2f} us, latch lazy {c['latch_lazy_us_per_op']:.2f} us")
    print("tiny function x + 1 per call: " + ", ".join(f"{k} {v:.2f} us" for k, v in tiny.items()))
    result = {"rows": rows, "geomean_once_vs_every_batch1": speedups, "per_op_trace": costs, "tiny": tiny,
              "threads": {"torch": a.threads, "latch": latch_threads}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(bars(rows, modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
