#!/usr/bin/python3
"""latch's trace-once mode against PyTorch eager on the same architectures.

  bench/compare_torch.py [--model M ...] [--batch 1,8] [--size default,224] [--repeat N] [--rounds N] [--warmup N]
                         [--threads N] [--torch-passive] [--peak N] [--json FILE] [--latch build/latch]
                         [--python /usr/bin/python3]

For each size, model and batch size it runs `latch bench --model M --mode once --batch B --json`
(LATCH_CACHE=memory, so the compile happens in latch's warm-up step and not in the timed ones)
and `bench/torch_zoo.py time` with the same batch, size, repeat count and thread count
(LATCH_THREADS; torch.set_num_threads and OMP_NUM_THREADS, PyTorch's OpenMP otherwise at its
defaults; --torch-passive times it again with OMP_WAIT_POLICY=PASSIVE, a second column), then
prints median wall ms per step on both sides, their ratio latch/torch (below 1: latch is
faster), the geometric mean of the ratios per batch size, and latch's effective GFLOP/s (the
convolutions' and products' flops, counted by torch_zoo.py, over the step's time) next to the
peak of one N x N product measured through latch in the same run (`latch bench --peak N`).
Sizes: `default` is each model's own (read back from latch's JSON and passed on to PyTorch, so
both sides see the same input); by default the image models also run at 224. A model that
fails on either side is printed with its error and left out of the geomean; the exit status
is 1 only if no model ran on both sides, 2 for bad arguments.

Opt-in: the PyTorch side needs Debian's python3-torch and python3-torchvision (`make
compare-torch`). This file imports neither: torch_zoo.py runs as a child process, so the table
and geomean logic can be tested where torch is not installed (tests/test_compare_torch.sh).
bench/compare_ort.py adds ONNX Runtime on the same rows and reuses these functions.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The models both sides have; at latch's default sizes (latch bench --help).
DEFAULT_MODELS = ["mlp", "resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16",
                  "bert_small", "vit_tiny"]
# The image models, which also run at the size they are used at.
IMAGE_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet", "vgg16"]
LARGE_SIZE = 224


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


def gflops(flops, ms):
    """Flops over milliseconds as GFLOP/s; None when either is unknown."""
    return flops / (ms * 1e6) if flops and ms else None


def make_row(model, batch, latch, torch, flops=None):
    """One table row from the two sides' (median, samples, size, error, min) tuples; flops:
    the step's convolution and product flops (torch_zoo.py counts them), or None."""
    l_ms, l_samples, l_size, l_err, l_min = latch
    t_ms, t_samples, t_size, t_err, t_min = torch
    row = {"model": model, "batch": batch, "size": l_size if l_size is not None else t_size,
           "latch_once_ms": l_ms, "torch_ms": t_ms, "latch_samples_ms": l_samples, "torch_samples_ms": t_samples,
           "latch_min_ms": l_min, "torch_min_ms": t_min,
           "latch_error": l_err, "torch_error": t_err, "ratio": None, "ratio_min": None,
           "flops": flops, "latch_gflops": gflops(flops, l_ms) if l_err is None else None}
    # Different sizes would make the ratio meaningless; say so rather than divide.
    if l_err is None and t_err is None and l_size is not None and t_size is not None and l_size != t_size:
        row["torch_error"] = f"size {t_size} differs from latch's {l_size}"
    elif l_err is None and t_err is None and l_ms and t_ms:
        row["ratio"] = l_ms / t_ms
        # Fastest step against fastest step: less sensitive to a loaded machine than medians.
        if l_min and t_min:
            row["ratio_min"] = l_min / t_min
    if row["torch_error"]:  # torch's count is for its run, which failed or saw another input
        row["flops"] = row["latch_gflops"] = None
    return row


def group_key(row):
    """Rows are summarised per batch size and size class: "1" for the models' default sizes,
    "1 @224" for an explicit size."""
    size_class = row.get("size_class", "default")
    return str(row["batch"]) if size_class == "default" else f"{row['batch']} @{size_class}"


def summarise(rows, ratio="ratio", ratio_min="ratio_min", ratio_by_round=None):
    """Geomean of a ratio column per group (group_key, a string, for JSON) and over every row;
    of ratio_min's too, and of ratio_by_round's when given (geomean_by_round)."""
    groups = []
    for r in rows:
        if group_key(r) not in groups:
            groups.append(group_key(r))

    def summary(members):
        ratios = [r[ratio] for r in members if r.get(ratio) is not None]
        mins = [r[ratio_min] for r in members if r.get(ratio) is not None]
        out = {"geomean": geomean(ratios), "geomean_min": geomean(mins), "models": len(ratios),
               "max": max(ratios) if ratios else None}
        if ratio_by_round:
            out["geomean_by_round"] = geomean([r.get(ratio_by_round) for r in members if r.get(ratio) is not None])
        return out

    per_batch = {g: summary([r for r in rows if group_key(r) == g]) for g in groups}
    return {"per_batch": per_batch, "all": summary(rows)}


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def fmt_ratio(value, width):
    return f"{fmt(value, '.2f'):>{width - 1}}{'x' if value is not None else ' '}"


def peak_line(peak):
    """The peak's line under a table: GFLOP/s of one product through latch, or why none."""
    if not peak:
        return "peak: not measured"
    if peak.get("error"):
        return f"peak: not measured ({peak['error']})"
    kernels = f"one f32 {peak['n']}x{peak['n']} product through latch's dot"
    if peak.get("conv_gflops") is not None:
        kernels = (f"the better of one f32 {peak['n']}x{peak['n']} product ({peak['product_gflops']:.1f}) and one 3x3 "
                   f"convolution 128->128 at 56x56, batch 8 ({peak['conv_gflops']:.1f}) through latch")
    return (f"peak: {peak['gflops']:.1f} GFLOP/s, {kernels} (latch bench --peak, same threads); GF/s columns: "
            f"convolution and product flops over the step's median")


def steps_text(repeat, rounds, alternating=False):
    """How many steps each median is over, for a table's header; alternating: the sides'
    order changes from round to round (compare_ort's)."""
    if rounds == 1:
        return f"{repeat} steps"
    order = ", the sides' order alternating" if alternating else ""
    return f"{repeat * rounds} steps ({repeat} in each of {rounds} rounds{order})"


def format_table(rows, summary, threads, repeat, warmup, torch_version, wait_policy="default", peak=None,
                 passive=False, rounds=1):
    policy = "OpenMP defaults" if wait_policy == "default" else f"OMP_WAIT_POLICY={wait_policy}"
    out = [f"compare_torch: latch once (LATCH_CACHE=memory) vs PyTorch {torch_version or '?'} eager, "
           f"median wall ms per step over {steps_text(repeat, rounds)} (after {warmup} warm-up), {threads} thread(s) each "
           f"(torch {policy}); min ratio: fastest step against fastest step",
           f"{'model':<14} {'batch':>5} {'size':>5} {'latch once ms':>14} {'torch ms':>10} {'latch/torch':>12} "
           f"{'min ratio':>10} {'latch GF/s':>10} {'%peak':>6}" + (f" {'passive ms':>10} {'l/passive':>10}" if passive else "")]
    peak_gflops = peak.get("gflops") if peak else None
    for r in rows:
        share = 100 * r["latch_gflops"] / peak_gflops if r.get("latch_gflops") and peak_gflops else None
        line = (f"{r['model']:<14} {r['batch']:>5} {fmt(r['size'], 'd'):>5} {fmt(r['latch_once_ms'], '.3f'):>14} "
                f"{fmt(r['torch_ms'], '.3f'):>10} {fmt_ratio(r['ratio'], 12)} {fmt_ratio(r['ratio_min'], 10)} "
                f"{fmt(r.get('latch_gflops'), '.1f'):>10} {fmt(share, '.0f'):>6}")
        if passive:
            line += f" {fmt(r.get('torch_passive_ms'), '.3f'):>10} {fmt_ratio(r.get('ratio_passive'), 10)}"
        errors = [f"{side} failed: {r[key]}" for side, key in
                  (("latch", "latch_error"), ("torch", "torch_error"), ("torch passive", "torch_passive_error"))
                  if r.get(key)]
        if errors:
            line += "  (" + "; ".join(errors) + ")"
        out.append(line)
    for b, s in summary["per_batch"].items():
        out.append(f"{'geomean batch ' + b:<26} {'':>14} {'':>10} {fmt_ratio(s['geomean'], 12)} "
                   f"{fmt_ratio(s['geomean_min'], 10)}  ({s['models']} model{'s' if s['models'] != 1 else ''})")
    a = summary["all"]
    out.append(f"{'geomean all':<26} {'':>14} {'':>10} {fmt_ratio(a['geomean'], 12)} "
               f"{fmt_ratio(a['geomean_min'], 10)}  ({a['models']} row{'s' if a['models'] != 1 else ''}); "
               "below 1: latch is faster")
    out.append(peak_line(peak))
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


def run_latch(args, model, batch, size, tmp, log, files=None, env_extra=None):
    """latch's once-mode figures for model at batch and size (0: the model's default); files
    (compare_ort's): the weights directory and input file it runs on and where its last
    step's output goes ("weights", "input", "latch_output")."""
    path = os.path.join(tmp, f"latch-{model}-{batch}-{size}.json")
    argv = [args.latch, "bench", "--model", model, "--mode", "once", "--batch", str(batch), "--repeat",
            str(args.repeat), "--warmup", str(args.warmup), "--json", path]
    if size:
        argv += ["--size", str(size)]
    if files:
        argv += ["--weights", files["weights"], "--input", files["input"], "--output", files["latch_output"]]
    env = dict(os.environ, LATCH_CACHE="memory", LATCH_THREADS=str(args.threads), **(env_extra or {}))
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


def run_torch(args, model, batch, size, tmp, log, passive=False, files=None):
    """(PyTorch's figures, its version, the step's flops) for model at batch and size; files
    as run_latch's (the output to "torch_output", the weights from "state_dict" if any)."""
    path = os.path.join(tmp, f"torch-{model}-{batch}-{size}-{int(passive)}.json")
    argv = [args.python, args.torch_zoo, "time", "--model", model, "--batch", str(batch), "--repeat", str(args.repeat),
            "--warmup", str(args.warmup), "--threads", str(args.threads), "--json", path]
    if size:
        argv += ["--size", str(size)]
    if files:
        argv += ["--input", files["input"]]
        if not passive:
            argv += ["--output", files["torch_output"]]
        if files.get("state_dict"):
            argv += ["--state-dict", files["state_dict"]]
    # PyTorch's intra-op pool also reads OMP_NUM_THREADS at import; set it to agree with
    # set_num_threads so neither side gets more cores.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    # GNU OpenMP's threads spin at barriers by default; on a machine shared with other work a
    # spinning thread holds a core another needs and steps take 10-50x longer at random
    # (measured: mobilenet_v2 batch 1 at 840 ms instead of 11). PyTorch is timed as users run
    # it, with its defaults; the passive run shows what sleeping waits give.
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    rc, output = run_child(argv, env, args.timeout, log)
    if rc is None:
        return (None, None, None, output, None), None, None
    if rc != 0:
        return (None, None, None, f"exit {rc}: {tail(output)}", None), None, None
    doc, err = read_json(path)
    if doc is None:
        return (None, None, None, err, None), None, None
    return torch_result(doc, model), doc.get("torch"), (doc.get("models", {}).get(model) or {}).get("flops")


def run_peak(args, tmp, log):
    """The product peak through latch (`latch bench --peak N`), or {"error": why}."""
    if not args.peak:
        return None
    path = os.path.join(tmp, "peak.json")
    argv = [args.latch, "bench", "--peak", str(args.peak), "--json", path]
    rc, output = run_child(argv, dict(os.environ, LATCH_THREADS=str(args.threads)), args.timeout, log)
    if rc != 0:
        return {"error": output if rc is None else f"exit {rc}: {tail(output)}"}
    doc, err = read_json(path)
    return doc if doc is not None else {"error": err}


def parse_sizes(text):
    """--size values: integers, or `default` (also 0) for each model's own size."""
    sizes = []
    for item in parse_list(text, "size"):
        if item == "default":
            item = "0"
        if not item.isdigit():
            raise ValueError(item)
        sizes.append(int(item))
    return sizes


def plan_runs(models, batches, sizes, explicit_sizes):
    """(size, batch, model) in run order. Without --size: every model at its default size, and
    the image models at LARGE_SIZE too; with it, every model at every size given."""
    runs = []
    for size in sizes:
        for batch in batches:
            for model in models:
                if explicit_sizes or size == 0 or model in IMAGE_MODELS:
                    runs.append((size, batch, model))
    return runs


def run_sides(args, model, batch, size, tmp, log, files=None):
    """One round of latch and PyTorch on one model, batch and size: (latch, torch, torch passive
    or None), each a (median, samples, size, error, min) tuple, then PyTorch's version and the
    step's flops; files: as run_latch's."""
    latch = run_latch(args, model, batch, size, tmp, log, files)
    # PyTorch gets the size latch ran at, so a model's default size is latch's.
    run_size = size or latch[2]
    flops = version = passive = None
    if run_size:
        torch, version, flops = run_torch(args, model, batch, run_size, tmp, log, files=files)
        if args.torch_passive:
            passive, _, _ = run_torch(args, model, batch, run_size, tmp, log, passive=True, files=files)
    else:  # torch_zoo's own default (224) would not be the same input
        torch = (None, None, None, "not run: latch gave no size (pass --size)", None)
    return (latch, torch, passive), version, flops


def merge_rounds(results):
    """A side's (median, samples, size, error, min) tuples from several rounds as one: the
    median and the least of every round's samples together (a round's median stands for its
    samples where it gave none); the first failed round as it is."""
    if len(results) == 1:
        return results[0]
    for r in results:
        if r[3] is not None:
            return r
    samples = [s for r in results for s in (r[1] or [r[0]])]
    least = min(r[4] if r[4] is not None else r[0] for r in results)
    return statistics.median(samples), samples, results[0][2], None, least


def row_from_rounds(model, batch, size, rounds):
    """The row from run_sides' results of every round (at least one), and PyTorch's version."""
    sides = [merge_rounds([r[0][k] for r in rounds]) if rounds[0][0][k] else None for k in range(3)]
    version = next((r[1] for r in rounds if r[1]), None)
    flops = next((r[2] for r in rounds if r[2]), None)
    row = make_row(model, batch, sides[0], sides[1], flops)
    row["size_class"] = size or "default"
    row["rounds"] = len(rounds)
    passive = sides[2]
    if passive:
        row["torch_passive_ms"], row["torch_passive_error"] = passive[0], passive[3]
        row["ratio_passive"] = (row["latch_once_ms"] / passive[0]
                                if row["latch_once_ms"] and passive[0] and not row["latch_error"] else None)
    return row, version


def parse_list(text, what):
    items = [x for part in text for x in part.split(",") if x]
    if not items:
        raise SystemExit(f"compare_torch.py: --{what} needs at least one value")
    return items


def add_common_arguments(parser, default_repeat, default_rounds=1):
    """The options compare_torch.py and compare_ort.py share."""
    # extend: a repeated --model adds to the list instead of replacing it.
    parser.add_argument("--model", nargs="+", action="extend", help="models (comma or space separated)")
    parser.add_argument("--batch", nargs="+", action="extend", help="batch sizes (default 1,8)")
    parser.add_argument("--size", nargs="+", action="extend",
                        help="image sides or sequence lengths, `default` for each model's own")
    parser.add_argument("--repeat", type=int, default=default_repeat,
                        help=f"timed steps per side (default {default_repeat})")
    parser.add_argument("--rounds", type=int, default=default_rounds,
                        help=f"times the whole plan is run, each side's samples of a row pooled (default "
                        f"{default_rounds}): this machine's speed drifts by minutes")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first, per side (default 2; "
                        "latch compiles in the first)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads per side (default: cores)")
    parser.add_argument("--peak", type=int, default=2048, help="side of the product timed for the peak (0: none)")
    parser.add_argument("--torch-passive", action="store_true",
                        help="time PyTorch again with OMP_WAIT_POLICY=PASSIVE (a second column)")
    parser.add_argument("--json", help="write every raw figure to FILE")
    parser.add_argument("--latch", default=os.environ.get("LATCH_BIN", "build/latch"))
    parser.add_argument("--python", default=os.environ.get("PYTHON", "/usr/bin/python3"),
                        help="the python with torch and torchvision (default /usr/bin/python3)")
    parser.add_argument("--torch-zoo", default=os.path.join(HERE, "torch_zoo.py"))
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child run (default 900)")
    parser.add_argument("--log", help="append every child's command and output to FILE")


def check_common_arguments(parser, args, default_models, default_sizes):
    """(models, batches, sizes, explicit sizes) from the shared options, or a usage error."""
    models = parse_list(args.model, "model") if args.model else default_models
    try:
        batches = [int(b) for b in parse_list(args.batch or ["1,8"], "batch")]
    except ValueError:
        parser.error(f"--batch takes integers, got {' '.join(args.batch or [])}")
    try:
        sizes = parse_sizes(args.size) if args.size else default_sizes
    except ValueError as e:
        parser.error(f"--size takes integers or `default`, got {e}")
    if (any(b < 1 for b in batches) or args.repeat < 1 or args.rounds < 1 or args.threads < 1 or args.warmup < 1
            or args.peak < 0):
        parser.error("--batch, --repeat, --rounds, --warmup and --threads must be at least 1, --size and --peak not "
                     "negative")
    if not os.access(args.latch, os.X_OK):
        parser.error(f"{args.latch} is not an executable (run make first, or pass --latch)")
    return models, batches, sizes, bool(args.size)


def write_json(path, doc):
    try:
        f = open(path, "w")
    except OSError as e:
        print(f"{os.path.basename(sys.argv[0])}: cannot write --json {path}: {e}", file=sys.stderr)
        return False
    with f:
        json.dump(doc, f, indent=1)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser, 5)
    args = parser.parse_args(argv)
    models, batches, sizes, explicit = check_common_arguments(parser, args, DEFAULT_MODELS, [0, LARGE_SIZE])
    rows, torch_version = [], None
    try:
        log = open(args.log, "a") if args.log else None
    except OSError as e:
        parser.error(f"cannot open --log {args.log}: {e}")
    with tempfile.TemporaryDirectory(prefix="compare-torch-") as tmp:
        peak = run_peak(args, tmp, log)
        plan = plan_runs(models, batches, sizes, explicit)
        results = {item: [] for item in plan}
        for rnd in range(args.rounds):
            for size, batch, model in plan:
                print(f"compare_torch: {model} batch {batch} size {size or 'default'} (round {rnd + 1} of "
                      f"{args.rounds}) ...", file=sys.stderr, flush=True)
                results[(size, batch, model)].append(run_sides(args, model, batch, size, tmp, log))
        for size, batch, model in plan:
            row, version = row_from_rounds(model, batch, size, results[(size, batch, model)])
            torch_version = torch_version or version
            rows.append(row)
    if log:
        log.close()
    summary = summarise(rows)
    wait_policy = os.environ.get("OMP_WAIT_POLICY", "default")
    print(format_table(rows, summary, args.threads, args.repeat, args.warmup, torch_version, wait_policy, peak,
                       args.torch_passive, args.rounds))
    if args.json and not write_json(args.json, {
            "compare_torch": 2, "clock": "wall", "threads": args.threads, "repeat": args.repeat, "rounds": args.rounds,
            "warmup": args.warmup, "torch": torch_version, "omp_wait_policy": wait_policy, "peak": peak,
            "rows": rows, "geomean": summary,
            "geomean_passive": summarise(rows, "ratio_passive", "ratio_passive") if args.torch_passive else None}):
        return 1
    return 0 if summary["all"]["models"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
