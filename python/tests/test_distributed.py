"""latch.torch.distributed: a data-parallel training step under mpirun on 2 and 4 ranks (more
ranks than cores: --oversubscribe), every rank's parameters after 10 SGD steps (momentum)
compared with one process of eager PyTorch training the same model on the global batch. Rank
0's parameters must reach every rank: the other ranks start from other values. Each graph is
compiled once for the job: by rank 0, the others receiving it (LATCH_LOG=compiles). A model
with training-mode batch norm is compared with one process playing the ranks as torch's DDP
runs them (rank 0's buffers at each step's start, each rank's own batch statistics). The
buckets are checked by hand, and outside mpirun the world is one process."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import latch.torch.distributed as dist
from conftest import close

STEPS, PER_RANK = 10, 6

WORKER = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    import latch.torch.distributed as dist
    from test_distributed import MODELS, batches, loss_fn

    rank, size = dist.init()
    out, cap = sys.argv[1], float(sys.argv[2])
    m = MODELS[sys.argv[3]](shift=rank)  # rank 0's parameters and buffers must win
    step = dist.DataParallel(m, loss_fn, bucket_cap_mb=cap)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches(size):
        per = x.shape[0] // size
        opt.zero_grad()
        step(x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
        opt.step()
    torch.save([t.detach().clone() for t in list(m.parameters()) + list(m.buffers())], f"{out}/{rank}.pt")
""")


def model(shift=0):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(shift)
    return m


def bn_model(shift=0):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    with torch.no_grad():
        for t in list(m.parameters()) + list(m.buffers()):
            t.add_(shift)
    return m


MODELS = {"plain": model, "bn": bn_model}


def loss_fn(m, x, y):
    return nn.functional.cross_entropy(m(x), y)


def batches(size):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(PER_RANK * size, 8, generator=g), torch.randint(0, 4, (PER_RANK * size,), generator=g))
            for _ in range(STEPS)]


def eager(size):
    """One process of eager PyTorch on the global batch: the parameters after the steps."""
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches(size):
        opt.zero_grad()
        loss_fn(m, x, y).backward()
        opt.step()
    return [p.detach() for p in m.parameters()]


def ddp_reference(size):
    """One process playing the ranks as torch's DDP (broadcast_buffers=True) runs them: at each
    step's start every rank takes rank 0's buffers, each rank's forward normalizes with its own
    batch's statistics and moves its own copy of the running statistics, the gradients are
    averaged, and rank 0 keeps its copy. Each rank's parameters and buffers after the steps."""
    m = bn_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches(size):
        per, root, total, kept = x.shape[0] // size, [b.clone() for b in m.buffers()], None, []
        for r in range(size):
            with torch.no_grad():
                for b, v in zip(m.buffers(), root):
                    b.copy_(v)
            m.zero_grad()
            loss_fn(m, x[r * per:(r + 1) * per], y[r * per:(r + 1) * per]).backward()
            grads = [p.grad.clone() for p in m.parameters()]
            total = grads if total is None else [a + g for a, g in zip(total, grads)]
            kept.append([b.detach().clone() for b in m.buffers()])
        for p, g in zip(m.parameters(), total):
            p.grad = g / size
        opt.step()
        with torch.no_grad():
            for b, v in zip(m.buffers(), kept[0]):
                b.copy_(v)
    params = [p.detach().clone() for p in m.parameters()]
    return [params + kept[r] for r in range(size)]


def run_ranks(tmp_path, ranks, cap_mb, btl, kind="plain"):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun is not installed (install-deps.sh installs openmpi-bin)"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]), LATCH_COLLECTIVE_TIMEOUT="60",
               LATCH_LOG="compiles", LATCH_CACHE="memory")
    cmd = [mpirun, "--oversubscribe", "-np", str(ranks), "--mca", "btl", btl, sys.executable, str(script),
           str(tmp_path), str(cap_mb), kind]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [torch.load(tmp_path / f"{r}.pt") for r in range(ranks)], done.stderr


@pytest.mark.parametrize("ranks, cap_mb, btl", [(2, 25, "self,vader"), (4, 0.001, "self,tcp")])
def test_data_parallel_matches_one_process(tmp_path, ranks, cap_mb, btl):
    want = eager(ranks)
    got, log = run_ranks(tmp_path, ranks, cap_mb, btl)
    # each graph compiled by rank 0 alone, the others receiving it (LATCH_LOG=compiles)
    compiled, received = log.count(" compiled in "), log.count(" received from rank 0 ")
    assert compiled >= 2 and received == compiled * (ranks - 1), log[-3000:]
    assert log.count(f"compiles for the job of {ranks} ranks: 1 ") == compiled * ranks, log[-3000:]
    for r, params in enumerate(got):
        assert len(params) == len(want)
        for got, expected in zip(params, want):
            close(got, expected)


def test_batch_norm_as_ddp(tmp_path):
    want = ddp_reference(2)
    # the ranks' running statistics differ (each moved by its own batch): a check that could fail
    assert (want[0][-3] - want[1][-3]).abs().max() > 1e-3
    got, _ = run_ranks(tmp_path, 2, 25, "self,vader", "bn")
    for r in range(2):
        assert len(got[r]) == len(want[r])
        for g, w in zip(got[r], want[r]):
            close(g, w)
            assert g.dtype == w.dtype


def test_buckets_by_hand():
    # four f32 tensors of 16, 64, 4 and 256 bytes, buckets of 80 bytes from the last back:
    # [3] alone (over the cap), [2, 1] (68), [0] (16 would make 84)
    ts = [torch.zeros(4), torch.zeros(16), torch.zeros(1), torch.zeros(64)]
    assert dist._buckets(ts, 80) == [[3], [2, 1], [0]]
    assert dist._buckets(ts, 1 << 20) == [[3, 2, 1, 0]]
    # a dtype change starts a bucket
    assert dist._buckets([torch.zeros(2), torch.zeros(2, dtype=torch.float64)], 1 << 20) == [[1], [0]]


def test_one_process_without_mpirun():
    code = ("import latch.torch.distributed as d, torch\n"
            "print(d.init())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI_"))}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(0, 1)"
