"""python3 -m latch.bench: per model, at batch 1 and 8 and at a small size and 224x224 (128
tokens for the transformer blocks), ms per step of PyTorch eager, torch.jit.trace, torch._lazy
(TorchScript backend), latch lazy (trace every) and latch compile (trace once); the
trace-once / trace-every speedup per model and its geomean; the per-op trace cost of both
lazy modes; the per-call time of each trace-once mode on a tiny function. --json FILE
writes every figure; --svg FILE draws the table as grouped bars; --tiny-only measures the
tiny function alone.

  python3 -m latch.bench [--models a,b] [--batch 1,8] [--sizes small,full] [--repeat N]
                         [--modes eager,...] [--threads N] [--json FILE] [--svg FILE]
                         [--tiny-only]"""
import argparse
import json
import math
import os
import statistics
import subprocess
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


def child(mode, name, batch, size, repeat):
    """One peer's figures in this process (run by isolated): ms per step, and for the lazy
    modes at batch 1 the us per aten op of tracing alone."""
    module, make = models.build(name, size)
    args = make(batch, size)
    training = name.startswith("train_")
    out = {}
    with torch.no_grad() if not training else torch.enable_grad():
        step = M.build(mode, module, args, training, name)
        out["ms"] = None if step is None else median_ms(step, repeat)
    if batch == 1 and mode in ("torch_lazy", "latch_lazy") and not training:
        out.update(per_op_cost(name, size, 5, [mode]))
    print("LATCH_BENCH_CHILD " + json.dumps(out))


def isolated(mode, name, batch, size, repeat):
    """child() in a new process: torch._lazy aborts the process on some models (a failed
    CHECK), which then costs one cell of the table, not the run."""
    cmd = [sys.executable, "-m", "latch.bench", "--child", f"{mode},{name},{batch},{size}", "--repeat", str(repeat)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    for line in run.stdout.splitlines():
        if line.startswith("LATCH_BENCH_CHILD "):
            return json.loads(line.split(" ", 1)[1]), None
    tail = (run.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return {}, f"exit {run.returncode}: {tail}"


def run_model(name, batch, size, modes, repeat):
    module, make = models.build(name, size)
    args = make(batch, size)
    training = name.startswith("train_")
    row = {"model": name, "batch": batch, "size": size, "ms": {}}
    for mode in modes:
        if mode == "torch_lazy":
            got, error = isolated(mode, name, batch, size, repeat)
            row["ms"][mode] = got.get("ms")
            if error:
                row.setdefault("errors", {})[mode] = error
            if "torch_lazy_us_per_op" in got:
                row["torch_lazy_us_per_op"] = got["torch_lazy_us_per_op"]
            continue
        try:
            with torch.no_grad() if not training else torch.enable_grad():
                step = M.build(mode, module, args, training, name)
                row["ms"][mode] = None if step is None else median_ms(step, repeat)
        except Exception as e:  # a peer that cannot run this model: said, not fatal
            row["ms"][mode] = None
            row.setdefault("errors", {})[mode] = f"{type(e).__name__}: {str(e)[:200]}"
    if batch == 1 and not training and "latch_lazy" in modes:
        row.update(per_op_cost(name, size, 5, ["latch_lazy"]))
    once, every = row["ms"].get("latch_compile"), row["ms"].get("latch_lazy")
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
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--json")
    p.add_argument("--svg")
    p.add_argument("--tiny-only", action="store_true", help="only the per-call time on the tiny function")
    a = p.parse_args(argv)
    if a.child:
        mode, name, batch, size = a.child.split(",")
        return child(mode, name, int(batch), int(size), a.repeat)
    if a.tiny_only:
        return tiny_only(a.json)
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
        small_full = models.MODELS  # (builder, make_input, small, full) per model
        picked = [r["once_vs_every"] for r in rows if r["batch"] == 1 and
                  r["size"] == small_full[r["model"]][2 if size_kind == "small" else 3] and
                  (size_kind == "small" or small_full[r["model"]][2] != small_full[r["model"]][3])]
        speedups[size_kind] = geomean(picked)
    costs = [r for r in rows if r.get("torch_lazy_us_per_op") and r.get("latch_lazy_us_per_op")]
    tiny = tiny_overhead()
    print("\nall rows:")
    print_table(rows, modes)
    for k, v in speedups.items():
        if v:
            print(f"trace once / trace every (latch compile vs latch lazy), geomean at batch 1, {k} size: {v:.2f}x")
    for c in costs:
        print(f"per-op trace cost, {c['model']} {c['size']} ({c['aten_ops']} aten ops): torch lazy "
              f"{c['torch_lazy_us_per_op']:.2f} us, latch lazy {c['latch_lazy_us_per_op']:.2f} us")
    if costs:
        t, l = geomean([c["torch_lazy_us_per_op"] for c in costs]), geomean([c["latch_lazy_us_per_op"] for c in costs])
        print(f"per-op trace cost, geomean: torch lazy {t:.2f} us, latch lazy {l:.2f} us")
    for r in rows:
        for mode, error in r.get("errors", {}).items():
            print(f"{r['model']} batch {r['batch']} size {r['size']}: {mode} failed: {error}")
    print_tiny(tiny)
    result = {"rows": rows, "geomean_once_vs_every_batch1": speedups, "tiny": tiny,
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
