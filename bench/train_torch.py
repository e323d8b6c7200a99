#!/usr/bin/python3
"""Training steps through latch.torch.compile against PyTorch eager on twins of each model.

  PYTHONPATH=build/python bench/train_torch.py [--model resnet18,transformer,mlp] [--steps 10]
                                               [--threads 2] [--whole] [--json FILE]

A step is forward, cross-entropy (or MSE) loss, backward and torch.optim.SGD(momentum=0.9):
the same batches on both sides. latch compiles the model (the autograd path; the optimizer
steps in PyTorch), or with --whole the step function itself: forward, loss, backward and the
optimizer's step in one graph (docs/pytorch-training.md). It prints, per model, the largest parameter difference after
the steps (relative to the parameters' largest magnitude: the accuracy rule scaled by the
step count passes at 1e-3 * steps), and the median wall time of the steps after the first
(which traces and compiles) on both sides, with their ratio latch / eager (below 1: latch is
faster). Threads: torch.set_num_threads and LATCH_THREADS, set before latch opens.

Models: resnet18 at 64x64, batch 16 (torchvision, batch norm in training mode); a 2-layer
nn.TransformerEncoder, d=256, 4 heads, 128 tokens, batch 8 (dropout 0: eager's masks cannot
be drawn by latch, so the parameters are compared without it); an MLP 784-512-512-10, batch 64.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time


def build(name, torch, nn):
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        x, y = torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))
        return model, x, y, "ce"
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        model = nn.TransformerEncoder(layer, 2)
        x, y = torch.randn(8, 128, 256), torch.randn(8, 128, 256)
        return model, x, y, "mse"
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
        return model, x, y, "ce"
    raise SystemExit(f"train_torch.py: unknown model {name!r} (resnet18, transformer, mlp)")


def run(name, steps, torch, nn, F, lt, whole=False):
    model, x, y, loss_kind = build(name, torch, nn)
    model.train()
    twin = copy.deepcopy(model)
    loss_fn = F.cross_entropy if loss_kind == "ce" else F.mse_loss
    sides = {"eager": (model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)),
             "latch": (twin, torch.optim.SGD(twin.parameters(), lr=0.01, momentum=0.9))}

    def step(fn, opt, inputs):
        opt.zero_grad()
        loss_fn(fn(inputs), y).backward()
        opt.step()

    if whole:  # the step function compiled: one graph with the optimizer's update
        latch_opt = sides["latch"][1]
        compiled = lt.compile(lambda inputs: step(twin, latch_opt, inputs))
        steps_of = {"eager": lambda inputs: step(model, sides["eager"][1], inputs), "latch": compiled}
    else:
        compiled = lt.compile(twin)
        steps_of = {side: (lambda inputs, fn=fn, opt=opt: step(fn, opt, inputs))
                    for side, (fn, opt) in sides.items()}
        steps_of["latch"] = lambda inputs: step(compiled, sides["latch"][1], inputs)
    times = {side: [] for side in sides}
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        noise = torch.randn(x.shape, generator=g) * 0.1
        for side in sides:
            start = time.perf_counter()
            steps_of[side](x + noise)
            times[side].append(time.perf_counter() - start)
    scale = max(p.abs().max().item() for p in model.parameters())
    diff = max((p - q).abs().max().item() for p, q in zip(model.parameters(), twin.parameters()))
    skip = 2 if whole else 1  # a whole step's first call runs eagerly (the optimizer makes its state)
    eager_ms, latch_ms = (statistics.median(times[s][skip:]) * 1e3 for s in ("eager", "latch"))
    return {"model": name, "steps": steps, "max_param_diff": diff, "relative_diff": diff / (1 + scale),
            "eager_ms": eager_ms, "latch_ms": latch_ms, "ratio": latch_ms / eager_ms,
            "first_latch_ms": times["latch"][0] * 1e3, "fallback": compiled.eager_reason}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18,transformer,mlp")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="compile the whole step, the optimizer's update included")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.steps < 3:
        raise SystemExit("train_torch.py: --steps must be at least 3 (the first steps compile)")
    os.environ["LATCH_THREADS"] = str(a.threads)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import latch.torch as lt
    torch.set_num_threads(a.threads)
    rows = []
    print(f"{'model':<12} {'param diff':>10} {'eager ms':>9} {'latch ms':>9} {'latch/eager':>11}")
    for name in a.model.split(","):
        r = run(name, a.steps, torch, nn, F, lt, a.whole)
        rows.append(r)
        note = f"  (eager fallback: {r['fallback']})" if r["fallback"] else ""
        print(f"{name:<12} {r['relative_diff']:>10.2e} {r['eager_ms']:>9.1f} {r['latch_ms']:>9.1f} "
              f"{r['ratio']:>11.2f}{note}")
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
