#!/usr/bin/python3
"""latch's trace-once mode against PyTorch eager on the same architectures (issue 7).

  bench/compare_torch.py [--model M ...] [--batch 1,8] [--size N] [--repeat N] [--warmup N] [--threads N]
                         [--json FILE] [--latch build/latch] [--python /usr/bin/python3]

For each model and batch size it runs `latch bench --model M --mode once --batch B --json`
(LATCH_CACHE=memory, so the compile happens in latch's warm-up step and not in the timed ones)
and `bench/torch_zoo.py time` with the same batch, size, repeat count and thread count
(LATCH_THREADS; torch.set_num_threads and OMP_NUM_THREADS, with OMP_WAIT_POLICY=PASSIVE unless
set, see run_torch), then prints median wall ms per step on both sides,
their ratio latch/torch (below 1: latch is faster) and the geometric mean of the ratios per
batch size. The size defaults to latch's per-model default (read back from latch's JSON) and is
passed on to PyTorch, so both sides see the same input. A model that fails on either side is
printed with its error and left out of the geomean; the exit status is 1 only if no model ran
on both sides, 2 for bad arguments.

Opt-in: the PyTorch side needs Debian's python3-torch and python3-torchvision (`make
compare-torch`). This file imports neither: torch_zoo.py runs as a child process, so the table
and geomean logic can be tested where torch is not installed (tests/test_compare_torch.sh).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The models both sides have; at latch's default sizes (latch bench --help).
DEFAULT_MODELS = ["mlp", "resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16",
                  "bert_small", "vit_tiny"]


def geomean(values):
    """Geometric mean of positive numbers; None for an empty list (nothing to summarise)."""
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def tail(text, lines=3):
    """The last few non-empty lines of a child's output, for an error message on one line."""
    kept = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "no output"


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"cannot read {path}: {e}"


def latch_result(doc, model):
    """(median ms, samples, size, error, min ms) for `model`'s once mode in a `latch bench --json` file."""
    if doc is None:
        return None, None, None, "no JSON", None
    for entry in doc.get("models", []):
        if entry.get("name") != model:
            continue
        once = entry.get("modes", {}).get("once")
        if entry.get("error"):
            return None, None, entry.get("size"), entry["error"], None
        if not once or once.get("median_ms") is None:
            return None, None, entry.get("size"), "no once-mode figures", None
        return once["median_ms"], once.get("samples_ms"), entry.get("size"), None, once.get("min_ms")
    return None, None, None, f"model {model} missing from latch's JSON", None


def torch_result(doc, model):
    """(median ms, samples, size, error, min ms) for `model` in a `torch_zoo.py time --json` file."""
    if doc is None:
        return None, None, None, "no JSON", None
    entry = doc.get("models", {}).get(model)
    if entry is None or entry.get("median_ms") is None:
        return None, None, None, f"model {model} missing from torch_zoo's JSON", None
    return entry["median_ms"], entry.get("samples_ms"), entry.get("size"), None, entry.get("min_ms")


def make_row(model, batch, latch, torch):
    """One table row from the two sides' (median, samples, size, error, min) tuples."""
    l_ms, l_samples, l_size, l_err, l_min = latch
    t_ms, t_samples, t_size, t_err, t_min = torch
    row = {"model": model, "batch": batch, "size": l_size if l_size is not None else t_size,
           "latch_once_ms": l_ms, "torch_ms": t_ms, "latch_samples_ms": l_samples, "torch_samples_ms": t_samples,
           "latch_min_ms": l_min, "torch_min_ms": t_min,
           "latch_error": l_err, "torch_error": t_err, "ratio": None, "ratio_min": None}
    # Different sizes would make the ratio meaningless; say so rather than divide.
    if l_err is None and t_err is None and l_size is not None and t_size is not None and l_size != t_size:
        row["torch_error"] = f"size {t_size} differs from latch's {l_size}"
    elif l_err is None and t_err is None and l_ms and t_ms:
        row["ratio"] = l_ms / t_ms
        # Fastest step against fastest step: less sensitive to a loaded machine than medians.
        if l_min and t_min:
            row["ratio_min"] = l_min / t_min
    return row


def summarise(rows):
    """Geomean of latch/torch per batch size (as a string key, for JSON) and over every row."""
    batches = sorted({r["batch"] for r in rows})
    per_batch = {}
    for b in batches:
        ratios = [r["ratio"] for r in rows if r["batch"] == b and r["ratio"] is not None]
        mins = [r["ratio_min"] for r in rows if r["batch"] == b and r["ratio"] is not None]
        per_batch[str(b)] = {"geomean": geomean(ratios), "geomean_min": geomean(mins), "models": len(ratios)}
    every = [r["ratio"] for r in rows if r["ratio"] is not None]
    mins = [r["ratio_min"] for r in rows if r["ratio"] is not None]
    return {"per_batch": per_batch, "all": {"geomean": geomean(every), "geomean_min": geomean(mins), "models": len(every)}}


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def format_table(rows, summary, threads, repeat, warmup, torch_version, wait_policy="PASSIVE"):
    out = [f"compare_torch: latch once (LATCH_CACHE=memory) vs PyTorch {torch_version or '?'} eager, "
           f"median wall ms per step over {repeat} steps (after {warmup} warm-up), {threads} thread(s) each "
           f"(torch OMP_WAIT_POLICY={wait_policy}); min ratio: fastest step against fastest step",
           f"{'model':<14} {'batch':>5} {'size':>5} {'latch once ms':>14} {'torch ms':>10} {'latch/torch':>12} {'min ratio':>10}"]
    for r in rows:
        line = (f"{r['model']:<14} {r['batch']:>5} {fmt(r['size'], 'd'):>5} {fmt(r['latch_once_ms'], '.3f'):>14} "
                f"{fmt(r['torch_ms'], '.3f'):>10} {fmt(r['ratio'], '.2f'):>11}{'x' if r['ratio'] is not None else ' '} "
                f"{fmt(r['ratio_min'], '.2f'):>9}{'x' if r['ratio_min'] is not None else ' '}")
        errors = [f"{side} failed: {r[key]}" for side, key in (("latch", "latch_error"), ("torch", "torch_error"))
                  if r[key]]
        if errors:
            line += "  (" + "; ".join(errors) + ")"
        out.append(line)
    for b, s in summary["per_batch"].items():
        out.append(f"{'geomean batch ' + b:<26} {'':>14} {'':>10} {fmt(s['geomean'], '.2f'):>11}"
                   f"{'x' if s['geomean'] is not None else ' '} {fmt(s['geomean_min'], '.2f'):>9}"
                   f"{'x' if s['geomean_min'] is not None else ' '}  ({s['models']} model{'s' if s['models'] != 1 else ''})")
    a = summary["all"]
    out.append(f"{'geomean all':<26} {'':>14} {'':>10} {fmt(a['geomean'], '.2f'):>11}"
               f"{'x' if a['geomean'] is not None else ' '} {fmt(a['geomean_min'], '.2f'):>9}"
               f"{'x' if a['geomean_min'] is not None else ' '}  ({a['models']} row{'s' if a['models'] != 1 else ''}); "
               "below 1: latch is faster")
    return "\n".join(out)


def run_child(argv, env, timeout, log):
    """Runs a child, returning (exit status, combined output); a timeout or a missing program
    is reported as an error string instead of an exception."""
    try:
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    except OSError as e:
        return None, f"cannot run {argv[0]}: {e}"
    if log:
        log.write(f"$ {' '.join(argv)}\n{done.stdout}\n")
    return done.returncode, done.stdout


def run_latch(args, model, batch, tmp, log):
    path = os.path.join(tmp, f"latch-{model}-{batch}.json")
    argv = [args.latch, "bench", "--model", model, "--mode", "once", "--batch", str(batch), "--repeat",
            str(args.repeat), "--warmup", str(args.warmup), "--json", path]
    if args.size:
        argv += ["--size", str(args.size)]
    env = dict(os.environ, LATCH_CACHE="memory", LATCH_THREADS=str(args.threads))
    rc, output = run_child(argv, env, args.timeout, log)
    if rc is None:
        return None, None, None, output, None
    doc, err = read_json(path) if os.path.exists(path) else (None, None)
    if doc is None:
        return None, None, None, f"exit {rc}: {tail(output)}" if rc else (err or "no JSON written"), None
    result = latch_result(doc, model)
    # latch bench exits non-zero when outputs disagree or are not finite: a failed run, even
    # though it timed something.
    if rc != 0 and result[3] is None:
        return None, None, result[2], f"exit {rc}: {tail(output)}", None
    return result


def run_torch(args, model, batch, size, tmp, log):
    path = os.path.join(tmp, f"torch-{model}-{batch}.json")
    argv = [args.python, args.torch_zoo, "time", "--model", model, "--batch", str(batch), "--repeat", str(args.repeat),
            "--warmup", str(args.warmup), "--threads", str(args.threads), "--json", path]
    if size:
        argv += ["--size", str(size)]
    # PyTorch's intra-op pool also reads OMP_NUM_THREADS at import; set it to agree with
    # set_num_threads so neither side gets more cores.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    # GNU OpenMP's threads spin at barriers by default; on a machine shared with other work a
    # spinning thread holds a core another needs and steps take 10-50x longer at random
    # (measured: mobilenet_v2 batch 1 at 840 ms instead of 11). Sleeping waits measure
    # PyTorch's kernels instead; a caller's own OMP_WAIT_POLICY wins.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    rc, output = run_child(argv, env, args.timeout, log)
    if rc is None:
        return (None, None, None, output, None), None
    if rc != 0:
        return (None, None, None, f"exit {rc}: {tail(output)}", None), None
    doc, err = read_json(path)
    if doc is None:
        return (None, None, None, err, None), None
    return torch_result(doc, model), doc.get("torch")


def parse_list(text, what):
    items = [x for part in text for x in part.split(",") if x]
    if not items:
        raise SystemExit(f"compare_torch.py: --{what} needs at least one value")
    return items


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # extend: a repeated --model adds to the list instead of replacing it.
    parser.add_argument("--model", nargs="+", action="extend", help="models (comma or space separated)")
    parser.add_argument("--batch", nargs="+", action="extend", help="batch sizes (default 1,8)")
    parser.add_argument("--size", type=int, default=0, help="image side or sequence length (default: latch's per model)")
    parser.add_argument("--repeat", type=int, default=5, help="timed steps per side (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first, per side (default 2; "
                        "latch compiles in the first)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads per side (default: cores)")
    parser.add_argument("--json", help="write every raw figure to FILE")
    parser.add_argument("--latch", default=os.environ.get("LATCH_BIN", "build/latch"))
    parser.add_argument("--python", default=os.environ.get("PYTHON", "/usr/bin/python3"),
                        help="the python with torch and torchvision (default /usr/bin/python3)")
    parser.add_argument("--torch-zoo", default=os.path.join(HERE, "torch_zoo.py"))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child run (default 900)")
    parser.add_argument("--log", help="append every child's command and output to FILE")
    args = parser.parse_args(argv)
    models = parse_list(args.model, "model") if args.model else DEFAULT_MODELS
    try:
        batches = [int(b) for b in parse_list(args.batch or ["1,8"], "batch")]
    except ValueError:
        parser.error(f"--batch takes integers, got {' '.join(args.batch or [])}")
    if any(b < 1 for b in batches) or args.repeat < 1 or args.threads < 1 or args.size < 0 or args.warmup < 1:
        parser.error("--batch, --repeat, --warmup and --threads must be at least 1, --size not negative")
    if not os.access(args.latch, os.X_OK):
        parser.error(f"{args.latch} is not an executable (run make first, or pass --latch)")

    rows, torch_version = [], None
    try:
        log = open(args.log, "a") if args.log else None
    except OSError as e:
        parser.error(f"cannot open --log {args.log}: {e}")
    with tempfile.TemporaryDirectory(prefix="compare-torch-") as tmp:
        for batch in batches:
            for model in models:
                print(f"compare_torch: {model} batch {batch} ...", file=sys.stderr, flush=True)
                latch = run_latch(args, model, batch, tmp, log)
                # PyTorch gets the size latch ran at, so a model's default size is latch's.
                size = args.size or latch[2]
                if size:
                    torch, version = run_torch(args, model, batch, size, tmp, log)
                else:  # torch_zoo's own default (224) would not be the same input
                    torch, version = (None, None, None, "not run: latch gave no size (pass --size)", None), None
                torch_version = torch_version or version
                rows.append(make_row(model, batch, latch, torch))
    if log:
        log.close()
    summary = summarise(rows)
    wait_policy = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
    print(format_table(rows, summary, args.threads, args.repeat, args.warmup, torch_version, wait_policy))
    if args.json:
        try:
            f = open(args.json, "w")
        except OSError as e:
            print(f"compare_torch.py: cannot write --json {args.json}: {e}", file=sys.stderr)
            return 1
        with f:
            json.dump({"compare_torch": 1, "clock": "wall", "threads": args.threads, "repeat": args.repeat,
                       "warmup": args.warmup, "torch": torch_version,
                       "omp_wait_policy": wait_policy, "rows": rows, "geomean": summary}, f, indent=1)
    return 0 if summary["all"]["models"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
