"""The data-parallel step's cost (latch.torch.distributed.DataParallel): run it under mpirun
on N ranks and alone (a world of one: the same graph without the all-reduce; --alone under
mpirun runs N of those side by side, sharing the machine as the ranks do), with the same
per-rank batch; each prints the median step time (forward, backward, the gradients' mean,
SGD) and rank 0 the all-reduce of the gradients' size alone, timed in the same run.

  python3 bench/dp_step.py [--width 512] [--batch 64] [--steps 30]
  mpirun -np 2 python3 bench/dp_step.py [--width 512] [--batch 64] [--steps 30]
  mpirun -np 2 python3 bench/dp_step.py --alone   # two single-process steps side by side"""
import argparse
import statistics
import time

import latch.torch.distributed as dist  # before torch: init() opens the world
import torch
from torch import nn

from latch import _latch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--alone", action="store_true", help="a world of one even under mpirun (the baseline, "
                    "run beside the others so that it shares the machine as they do)")
    a = ap.parse_args()
    rank, size = dist.world() if a.alone else dist.init()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(),
                          nn.Linear(a.width, 10))
    step = dist.DataParallel(model, lambda m, x, y: nn.functional.cross_entropy(m(x), y))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(a.batch, a.width), torch.randint(0, 10, (a.batch,))
    times = []
    for i in range(a.steps + 3):
        start = time.perf_counter()
        opt.zero_grad()
        step(x, y)
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - start)
    numel = sum(p.numel() for p in model.parameters())
    reduce_times = []
    if size > 1:
        flat = torch.randn(numel)
        f = _latch.Function(lambda inputs, args: [_latch.all_reduce(1, inputs[0])], 1, name="grads", shapes=1)
        for i in range(a.steps + 3):
            start = time.perf_counter()
            _latch.to_torch(f(flat)[0])
            if i >= 3:
                reduce_times.append(time.perf_counter() - start)
    if rank == 0:
        line = f"{size} rank(s), width {a.width}, batch {a.batch}/rank, {numel * 4 / 1e6:.1f} MB of gradients: " \
               f"step {statistics.median(times) * 1e3:.2f} ms"
        if reduce_times:
            line += f", all-reduce alone {statistics.median(reduce_times) * 1e3:.2f} ms"
        print(line)


if __name__ == "__main__":
    main()
