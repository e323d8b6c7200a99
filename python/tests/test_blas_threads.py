"""OpenBLAS beside a training step through latch.torch.compile: Debian's OpenBLAS (its
pthread build) starts a worker when it loads, latch's first compile stops it, and the later
compiles of a training step (its forward and backward graphs) must not start it again (that
build starts its server whenever its thread count is set). Counted as the process's threads
in /proc/self/task, in a fresh process, after torch.set_num_threads(2); the gradients are
eager PyTorch's."""
import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import copy, ctypes, json, os
    import latch  # noqa: F401
    import torch, torch.nn as nn, torch.nn.functional as F
    import latch.torch as lt

    def threads():
        return len(os.listdir("/proc/self/task"))

    torch.set_num_threads(2)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16 * 16, 10))
    twin = copy.deepcopy(net)
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    # latch's first compile (an inference graph) and both sides' OpenMP teams before counting
    with torch.no_grad():
        lt.compile(copy.deepcopy(net))(x)
    F.cross_entropy(twin(x), y).backward()
    before = threads()
    F.cross_entropy(lt.compile(net)(x), y).backward()
    after = threads()
    blas = ctypes.CDLL("libopenblas.so.0").openblas_get_num_threads()  # the library latch links
    diff = max(((p.grad - q.grad).abs().max() / (1 + q.grad.abs().max())).item()
               for p, q in zip(net.parameters(), twin.parameters()))
    print(json.dumps({"before": before, "after": after, "blas": blas, "diff": diff}))
""")


def test_a_training_step_starts_no_blas_worker():
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["after"] == got["before"], got
    assert got["blas"] == 1, got
    assert got["diff"] < 1e-4, got
