"""make check-torch-zoo: every model of latch/zoo.py compiled by latch.torch.compile at 224
(sequence modules: length 64), batch 1, eval mode, no_grad, on the threads given; a table of
model, compiled whole or in parts (how many), the max difference from eager (scaled by
1 + max |eager|), and the median latch and eager ms, with the geomean of latch / eager.

Eager is timed in a process of its own that never imports latch, in PyTorch's default
configuration (libgomp's wait policy as the environment had it before this script, no
OMP_WAIT_POLICY set by latch), on the same weights and inputs (both sides build the model
from the same seed); its outputs there are compared with latch's too. The two sides run in
turn, in blocks, so that a machine slowing for a while weighs on both medians alike."""
import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time

from eager_process import EagerProcess

BLOCKS = 5
SETTLE_S = 0.2  # between blocks: the threads of the side that just ran stop spinning


def load_zoo_alone():
    """latch/zoo.py without the latch package (whose import sets OMP_WAIT_POLICY)."""
    package = importlib.util.find_spec("latch").submodule_search_locations[0]  # found, not run
    spec = importlib.util.spec_from_file_location("zoo", os.path.join(package, "zoo.py"))
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    return zoo


def eager_child(name, size, threads):
    """The eager side: reads commands on stdin, answers one line each on stdout.
    'time N': N timed calls, the ms of each; 'out PATH': the outputs saved to PATH."""
    import torch
    torch.set_num_threads(threads)
    zoo = load_zoo_alone()
    module, args = zoo.build(name, size)
    with torch.no_grad():
        for _ in range(2):
            module(*[a.clone() for a in args])
        print(json.dumps({"wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
                          "threads": torch.get_num_threads()}), flush=True)
        for line in sys.stdin:
            command, value = line.split(maxsplit=1)
            if command == "time":
                times = []
                for _ in range(int(value)):
                    fresh = [a.clone() for a in args]
                    start = time.perf_counter()
                    module(*fresh)
                    times.append((time.perf_counter() - start) * 1e3)
                print(json.dumps(times), flush=True)
            elif command == "out":
                torch.save(zoo.flat(module(*args)), value.strip())
                print("ok", flush=True)
    return 0


def latch_times(compiled, args, n):
    import torch
    times = []
    with torch.no_grad():
        for _ in range(n):
            fresh = [a.clone() for a in args]  # a result kept for unchanged inputs is not timed
            start = time.perf_counter()
            compiled(*fresh)
            times.append((time.perf_counter() - start) * 1e3)
    return times


def median(values):
    return sorted(values)[len(values) // 2]


def row(zoo, name, size, repeat, threads, wait_policy):
    import torch
    r = zoo.check(name, size)
    eager = EagerProcess(__file__, ["--eager-child", name, size, threads], threads, wait_policy)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.pt")
            eager.ask("out " + path)
            with torch.no_grad():
                got = r["compiled"](*r["args"])
            r["diff"] = max(r["diff"], zoo.max_diff(got, torch.load(path)))
        per_block = max(1, repeat // BLOCKS)
        latch_ms, eager_ms = [], []
        for _ in range(min(BLOCKS, repeat)):
            latch_ms += latch_times(r["compiled"], r["args"], per_block)
            time.sleep(SETTLE_S)
            eager_ms += eager.ask(f"time {per_block}")
            time.sleep(SETTLE_S)
        r["latch_ms"], r["eager_ms"] = median(latch_ms), median(eager_ms)
    finally:
        eager.close()
    return r


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--eager-child":
        return eager_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--repeat", type=int, default=10, help="timed calls of each side (default 10)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("models", nargs="*")
    a = p.parse_args()
    wait_policy = os.environ.get("OMP_WAIT_POLICY")  # the eager side's, as the user had it
    os.environ.setdefault("LATCH_THREADS", str(a.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import latch  # noqa: F401  its settings (OMP_WAIT_POLICY=PASSIVE among them) before torch loads libgomp
    import torch
    torch.set_num_threads(a.threads)
    from latch import zoo
    names = a.models or zoo.ALL
    print(f"eager in its own process: OMP_WAIT_POLICY {wait_policy or 'unset'}, {a.threads} threads; "
          f"latch: OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY')}, {a.threads} threads")
    print(f"{'model':26} {'graph':>12} {'max diff':>10} {'latch ms':>9} {'eager ms':>9} {'ratio':>6}")
    ratios, bad = [], 0
    for name in names:
        try:
            r = row(zoo, name, a.size if name in zoo.VISION else a.length, a.repeat, a.threads, wait_policy)
        except Exception as e:  # a row, not the end of the table
            print(f"{name:26} error: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            bad += 1
            continue
        graph = "whole" if r["whole"] else f"{r['parts']} parts" if r["parts"] else "eager"
        ratio = r["latch_ms"] / r["eager_ms"]
        ratios.append(ratio)
        ok = r["whole"] and r["diff"] <= 1e-3 and r["shapes_match"]
        bad += not ok
        print(f"{name:26} {graph:>12} {r['diff']:10.2e} {r['latch_ms']:9.2f} {r['eager_ms']:9.2f} {ratio:6.2f}"
              + ("" if ok else "  <- " + (r["reason"] or ", ".join(r["eager_ops"]) or "differs")), flush=True)
    if ratios:
        print(f"geomean latch / eager: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} over {len(ratios)} models")
    print(f"{len(names) - bad} of {len(names)} whole and matching eager")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
