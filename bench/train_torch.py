#!/usr/bin/python3
"""make train-torch: training steps through latch.torch.compile against PyTorch eager.

  PYTHONPATH=build/python bench/train_torch.py [--model resnet18,transformer,mlp] [--steps 10]
                                               [--threads 2] [--whole] [--foreach] [--json FILE]

A step is forward, cross-entropy (or MSE) loss, backward and torch.optim.SGD(momentum=0.9)
(foreach=True with --foreach): the same batches on both sides. latch compiles the model (the
autograd path; the optimizer steps in PyTorch), or with --whole the step function itself:
forward, loss, backward and the optimizer's step in one graph (docs/pytorch-training.md).

Eager trains its own copy in a process of its own that never imports latch, in PyTorch's
default configuration (libgomp's wait policy as the environment had it before this script:
`import latch` sets OMP_WAIT_POLICY=PASSIVE for its process), driven over a pipe. Both
sides build the model from the same seed and draw the same batches; they run in turn, in
blocks of steps, so that a machine slowing for a while weighs on both medians alike. After
the steps the eager process hands its parameters over and they are compared with latch's.

It prints, per model, the largest parameter difference after the steps (relative to 1 + the
parameters' largest magnitude; the accuracy rule scaled by the step count passes at
1e-3 * steps), and the median wall time of the steps after the first (which traces and
compiles; with --whole the first two) on both sides, with their ratio latch / eager (below 1:
latch is faster). Threads: torch.set_num_threads and LATCH_THREADS on both sides.

Models: resnet18 at 64x64, batch 16 (torchvision, batch norm in training mode); a 2-layer
nn.TransformerEncoder, d=256, 4 heads, 128 tokens, batch 8 (dropout 0: eager's masks cannot
be drawn by latch, so the parameters are compared without it); an MLP 784-512-512-10, batch 64.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from eager_process import EagerProcess

BLOCK = 3        # steps of one side before the other runs
SETTLE_S = 0.2   # between blocks: the threads of the side that just ran stop spinning


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


class Side:
    """One side's model, optimizer, step function and batches: the next batch of the same
    sequence on both sides."""

    def __init__(self, name, torch, nn, F, foreach):
        self.torch = torch
        self.model, self.x, self.y, loss_kind = build(name, torch, nn)
        self.model.train()
        self.loss_fn = F.cross_entropy if loss_kind == "ce" else F.mse_loss
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9, foreach=foreach)
        self.generator = torch.Generator().manual_seed(1)
        self.run = lambda inputs: self.step(self.model, inputs)

    def step(self, fn, inputs):
        self.opt.zero_grad()
        self.loss_fn(fn(inputs), self.y).backward()
        self.opt.step()

    def timed(self, n):
        times = []
        for _ in range(n):
            batch = self.x + self.torch.randn(self.x.shape, generator=self.generator) * 0.1
            start = time.perf_counter()
            self.run(batch)
            times.append((time.perf_counter() - start) * 1e3)
        return times


def eager_child(name, threads, foreach):
    """The eager side: reads commands on stdin, answers one line each on stdout.
    'steps N': N timed steps, the ms of each; 'params PATH': the parameters saved to PATH."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    side = Side(name, torch, nn, F, foreach)
    print(json.dumps({"wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
                      "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        command, value = line.split(maxsplit=1)
        if command == "steps":
            print(json.dumps(side.timed(int(value))), flush=True)
        elif command == "params":
            torch.save([p.detach() for p in side.model.parameters()], value.strip())
            print("ok", flush=True)
    return 0


def latch_side(name, torch, nn, F, lt, whole, foreach):
    side = Side(name, torch, nn, F, foreach)
    if whole:  # the step function compiled: one graph with the optimizer's update
        model, opt, loss_fn, y = side.model, side.opt, side.loss_fn, side.y

        def step(inputs):
            opt.zero_grad()
            loss_fn(model(inputs), y).backward()
            opt.step()
        side.run = side.compiled = lt.compile(step)
    else:
        side.compiled = lt.compile(side.model)
        side.run = lambda inputs: side.step(side.compiled, inputs)
    return side


def run(name, steps, threads, wait_policy, torch, nn, F, lt, whole=False, foreach=False):
    latch = latch_side(name, torch, nn, F, lt, whole, foreach)
    eager = EagerProcess(__file__, ["--eager-child", name, threads, int(foreach)], threads, wait_policy)
    times = {"eager": [], "latch": []}
    try:
        done = 0
        while done < steps:
            n = min(BLOCK, steps - done)
            times["latch"] += latch.timed(n)
            time.sleep(SETTLE_S)
            times["eager"] += eager.ask(f"steps {n}")
            time.sleep(SETTLE_S)
            done += n
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "params.pt")
            eager.ask("params " + path)
            eager_params = torch.load(path)
    finally:
        eager.close()
    scale = max(p.abs().max().item() for p in eager_params)
    diff = max((p - q).abs().max().item() for p, q in zip(eager_params, latch.model.parameters()))
    skip = 2 if whole else 1  # a whole step's first call runs eagerly (the optimizer makes its state)
    eager_ms, latch_ms = (statistics.median(times[s][skip:]) for s in ("eager", "latch"))
    return {"model": name, "steps": steps, "max_param_diff": diff, "relative_diff": diff / (1 + scale),
            "eager_ms": eager_ms, "latch_ms": latch_ms, "ratio": latch_ms / eager_ms,
            "first_latch_ms": times["latch"][0], "fallback": latch.compiled.eager_reason}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--eager-child":
        return eager_child(sys.argv[2], int(sys.argv[3]), bool(int(sys.argv[4])))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18,transformer,mlp")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="compile the whole step, the optimizer's update included")
    ap.add_argument("--foreach", action="store_true", help="SGD(foreach=True) on both sides")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.steps < 3:
        raise SystemExit("train_torch.py: --steps must be at least 3 (the first steps compile)")
    wait_policy = os.environ.get("OMP_WAIT_POLICY")  # the eager side's, as the user had it
    os.environ["LATCH_THREADS"] = str(a.threads)
    import latch  # noqa: F401  its settings (OMP_WAIT_POLICY=PASSIVE among them) before torch loads libgomp
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import latch.torch as lt
    torch.set_num_threads(a.threads)
    print(f"eager in its own process: OMP_WAIT_POLICY {wait_policy or 'unset'}, {a.threads} threads; "
          f"latch: OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY')}, {a.threads} threads")
    rows, bad = [], 0
    print(f"{'model':<12} {'param diff':>10} {'eager ms':>9} {'latch ms':>9} {'latch/eager':>11}")
    for name in a.model.split(","):
        r = run(name, a.steps, a.threads, wait_policy, torch, nn, F, lt, a.whole, a.foreach)
        rows.append(r)
        ok = r["relative_diff"] <= 1e-3 * a.steps and not r["fallback"]
        bad += not ok
        note = f"  (eager fallback: {r['fallback']})" if r["fallback"] else "" if ok else "  <- differs"
        print(f"{name:<12} {r['relative_diff']:>10.2e} {r['eager_ms']:>9.1f} {r['latch_ms']:>9.1f} "
              f"{r['ratio']:>11.2f}{note}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
