#!/usr/bin/python3
"""latch's trace-once mode against ONNX Runtime and PyTorch eager on the same models, the same
weights and the same input, every output checked.

  bench/compare_ort.py [--suite images,transformers,generate|all] [--model M[@SIZE] ...] [--batch 1,8]
                       [--size 224] [--repeat N] [--rounds N] [--warmup N] [--threads N] [--quick]
                       [--weights FILE.pth] [--tolerance T] [--new-tokens N] [--ort DIR] [--node node]
                       [--onnx-dir DIR] [--peak N] [--torch-passive] [--json FILE]

Suites (default images): images, torchvision's resnet18, resnet50, mobilenet_v2,
squeezenet1_1, alexnet and vgg16 at --size (224); transformers, vit_b_16 at 224, a BERT-base
encoder (12 layers, 768, 12 heads) at 128 and 512 tokens and GPT-2 small (causal, pre-norm;
the last hidden state) at 128 tokens; generate, GPT-2 small generating --new-tokens tokens
(128) one step at a time on a KV cache that starts with 128 positions, the same cache on
every side. --model picks rows instead (`bert_base@512`; a bare name runs at --size).

Per model and size, `torch_zoo.py export-onnx` builds the model once (seeded with every weight
moved off its initial value, or with --weights, a file torch.save wrote, e.g. torchvision's
downloaded weights) and writes what every side reads (into --onnx-dir, kept between runs):
the ONNX file (batch dim dynamic), the weights as .npy for `latch bench --weights` and as a
state dict for PyTorch, and per batch size one seeded input file and PyTorch eager's output
on it. latch (`latch bench --mode once`, LATCH_CACHE=memory), ONNX Runtime from npm
(`bench/ort_time.js`) and PyTorch (`torch_zoo.py time`) then run on that input with the same
thread count, untimed warm-up steps first, and each writes the output of its last timed step:
the configuration that was timed is the one checked. A side whose output differs from the
reference beyond the accuracy rule (bench/check_outputs.py: the largest difference over the
reference's largest magnitude above --tolerance, 1e-3) FAILS: the row says so, its ratios
are left out of every geomean, and the exit status is 1.

Prints median ms per step for the three sides, latch/ORT and latch/torch per row (below 1:
latch is faster), their geomeans and largest ratio per suite and batch size, each side's
largest relative difference from the reference, and GFLOP/s: the step's convolution and
product flops (torch_zoo.py counts them) over its median. latch's are counted as done: a
convolution oneDNN ran by Winograd (ONEDNN_VERBOSE's account of one extra untimed run,
bench/conv_arith.py) at its reduced multiply count, the direct count beside it. The peak they
are a share of is `latch bench --peak`'s, measured again in every round, next to the machine's
theoretical peak (cores x clock x FMA width from /proc/cpuinfo). Generation rows print tokens
per second over all the timed steps.

--rounds N (default 3) runs the whole plan N times, ORT first in every other round, and pools
each side's samples of a row over the rounds: this machine's speed drifts over minutes, and a
row timed once sees one moment of it. The "by round" column pairs the sides within each round
instead: latch's median over ORT's in the same round (the two ran back to back), the median
of those ratios over the rounds. --quick: batch 1, one round of 3 steps.

Opt-in (`make compare-ort`, `make compare-ort-transformers`): needs python3-torch,
python3-torchvision, node, and onnxruntime-node installed with `npm install --ignore-scripts
onnxruntime-node` (the Makefile puts it under build/ort). Imports neither torch nor ORT
itself, so the table and check logic is tested with fake children (tests/test_compare_ort.sh).
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile

import check_outputs
import compare_torch as ct
import conv_arith

DEFAULT_ORT = os.path.join("build", "ort", "node_modules", "onnxruntime-node")
SUITES = {
    "images": [(m, None) for m in ct.IMAGE_MODELS],
    "transformers": [("vit_b_16", 224), ("bert_base", 128), ("bert_base", 512), ("gpt2_small", 128)],
    "generate": [("gpt2_small_gen", 128)],
}
# Models whose step grows a KV cache: timed as generation (tokens per second).
KV_MODELS = {"gpt2", "gpt2_small_gen"}


def plan_rows(args, parser):
    """[(suite, model, size)] from --model or --suite."""
    if args.model:
        rows = []
        sizes = ct.parse_sizes(args.size) if args.size else [ct.LARGE_SIZE]
        for item in ct.parse_list(args.model, "model"):
            name, _, size = item.partition("@")
            if size and not size.isdigit():
                parser.error(f"--model {item}: the size after @ is a number")
            for s in [int(size)] if size else sizes:
                if s < 1:
                    parser.error("--size: ONNX models are exported at one size: give it (default 224)")
                rows.append(("generate" if name in KV_MODELS else "models", name, s))
        return rows
    suites = ct.parse_list(args.suite or ["images"], "suite")
    if "all" in suites:
        suites = list(SUITES)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        parser.error(f"--suite: unknown {', '.join(unknown)} (known: {', '.join(SUITES)}, all)")
    size = ct.parse_sizes(args.size)[0] if args.size else ct.LARGE_SIZE
    if size < 1:
        parser.error("--size: ONNX models are exported at one size: give it (default 224)")
    return [(s, m, sz or size) for s in suites for m, sz in SUITES[s]]


def side_args(args, model):
    """The options a side runs a model with: generation times --new-tokens steps."""
    if model not in KV_MODELS:
        return args
    a = copy.copy(args)
    a.repeat = args.new_tokens
    return a


def export_dir(args, model, size, batch):
    """Where a model's files live: per model and size (a KV-cache model's weights hold its
    cache, so also per batch and step count)."""
    tag = f"-{os.path.splitext(os.path.basename(args.weights))[0]}" if args.weights else ""
    name = f"{model}-{size}{tag}"
    if model in KV_MODELS:
        name += f"-b{batch}-n{args.warmup + args.new_tokens}"
    return os.path.join(args.onnx_dir, name)


def prepare(args, model, size, batch, tmp, log):
    """The files the three sides read and write for one row, exported on first use, or
    (None, why)."""
    d = export_dir(args, model, size, batch)
    files = {"dir": d, "onnx": os.path.join(d, "model.onnx"), "weights": os.path.join(d, "weights"),
             "input": os.path.join(d, f"input-b{batch}.npy"), "reference": os.path.join(d, f"output-b{batch}.npy"),
             "state_dict": os.path.join(d, "weights.pt")}
    for side in ("latch", "ort", "torch"):
        files[f"{side}_output"] = os.path.join(tmp, f"{side}-{model}-{size}-{batch}.npy")
    needed = ("onnx", "weights", "input", "reference", "state_dict")
    if all(os.path.exists(files[k]) for k in needed):
        return files, None
    argv = [args.python, args.torch_zoo, "export-onnx", "--model", model, "--size", str(size), "--batch", str(batch),
            "--out", d]
    if model in KV_MODELS:
        argv += ["--steps", str(args.warmup + args.new_tokens)]
    if args.weights:
        argv += ["--state-dict", args.weights]
    rc, output = ct.run_child(argv, dict(os.environ), args.timeout, log)
    if rc != 0:
        return None, output if rc is None else f"export: exit {rc}: {ct.tail(output)}"
    missing = [k for k in needed if not os.path.exists(files[k])]
    if missing:
        return None, f"export wrote no {', '.join(missing)}"
    return files, None


def run_ort(args, model, batch, size, tmp, log, files):
    """ORT's (median ms, samples, size, error, min ms) and its version."""
    path = os.path.join(tmp, f"ort-{model}-{batch}-{size}.json")
    argv = [args.node, args.ort_time, "--ort", os.path.abspath(args.ort), "--onnx", files["onnx"], "--input",
            files["input"], "--output", files["ort_output"], "--repeat", str(args.repeat), "--warmup",
            str(args.warmup), "--threads", str(args.threads), "--json", path]
    if model in KV_MODELS:
        argv += ["--past", files["weights"]]
    rc, output = ct.run_child(argv, dict(os.environ, OMP_NUM_THREADS=str(args.threads)), args.timeout, log)
    if rc != 0:
        return (None, None, None, output if rc is None else f"exit {rc}: {ct.tail(output)}", None), None
    doc, err = ct.read_json(path)
    if doc is None or doc.get("median_ms") is None:
        return (None, None, None, err or "no median in ort_time's JSON", None), None
    return (doc["median_ms"], doc.get("samples_ms"), size, None, doc.get("min_ms")), doc.get("ort")


def check(ran, output, files, args):
    """The output check of a side that ran (its result tuple has no error), else None."""
    if ran[3] is not None:
        return None
    return check_outputs.compare(output, files["reference"], args.tolerance)


def winograd_saving(args, model, batch, size, tmp, log, files):
    """The flops per step latch's Winograd convolutions left out and how many ran, from one
    untimed run with ONEDNN_VERBOSE=1; (0, 0) for a model without 3x3 convolutions, None when
    the run failed."""
    if model not in ct.IMAGE_MODELS:
        return 0.0, 0.0
    a = copy.copy(args)
    a.repeat, a.warmup = 1, 1
    path = os.path.join(tmp, f"latch-{model}-{batch}-{size}.json")
    argv = [a.latch, "bench", "--model", model, "--mode", "once", "--batch", str(batch), "--size", str(size), "--repeat",
            "1", "--warmup", "1", "--json", path, "--weights", files["weights"], "--input", files["input"]]
    env = dict(os.environ, LATCH_CACHE="memory", LATCH_THREADS=str(args.threads), ONEDNN_VERBOSE="1")
    rc, output = ct.run_child(argv, env, args.timeout, log)
    return conv_arith.winograd_saving(output, 2) if rc == 0 else None


def round_ratios(sides, orts):
    """latch's median over ORT's in each round both sides ran in (run_sides' and run_ort's
    results, in round order)."""
    ratios = []
    for side, ort in zip(sides, orts):
        latch, o = side[0][0], ort[0]
        if latch[3] is None and o[3] is None and latch[0] and o[0]:
            ratios.append(latch[0] / o[0])
    return ratios


def add_ort(row, ort, by_round=()):
    """ORT's figures into a compare_torch row: its ms, latch/ORT (pooled, fastest steps, and
    the median of by_round, the rounds' own ratios), ORT's GFLOP/s."""
    o_ms, o_samples, o_size, o_err, o_min = ort
    row.update({"ort_ms": o_ms, "ort_min_ms": o_min, "ort_samples_ms": o_samples, "ort_error": o_err,
                "ratio_ort": None, "ratio_ort_min": None, "ratio_ort_rounds": list(by_round),
                "ratio_ort_by_round": None, "ort_gflops": None})
    if o_err is None and o_ms:
        row["ort_gflops"] = ct.gflops(row["flops"], o_ms)
        if row["latch_error"] is None and row["latch_once_ms"]:
            row["ratio_ort"] = row["latch_once_ms"] / o_ms
            if row["latch_min_ms"] and o_min:
                row["ratio_ort_min"] = row["latch_min_ms"] / o_min
            if by_round:
                row["ratio_ort_by_round"] = statistics.median(by_round)
    return row


def with_check(result, checked):
    """A side's merged (median, samples, size, error, min) with a failed check as its error."""
    if checked and not checked["ok"]:
        return result[:3] + (f"FAILED the output check: {checked['error']}",) + result[4:]
    return result


def build_row(suite, model, batch, size, sides, orts, checks, saving):
    """One row from every round's results, each side's check (the worst of its rounds) folded
    in: a failed side counts as failed, its ratios left out."""
    worst = {k: check_outputs.worst(v) for k, v in checks.items()}
    merged = [ct.merge_rounds([r[0][k] for r in sides]) if sides[0][0][k] else None for k in range(3)]
    version = next((r[1] for r in sides if r[1]), None)
    flops = next((r[2] for r in sides if r[2]), None)
    row = ct.make_row(model, batch, with_check(merged[0], worst["latch"]), with_check(merged[1], worst["torch"]), flops)
    row["size"], row["size_class"], row["suite"], row["rounds"] = size, suite, suite, len(sides)
    if merged[2]:
        row["torch_passive_ms"], row["torch_passive_error"] = merged[2][0], merged[2][3]
        row["ratio_passive"] = (row["latch_once_ms"] / merged[2][0]
                                if row["latch_once_ms"] and merged[2][0] and not row["latch_error"] else None)
    ort = with_check(ct.merge_rounds([o[0] for o in orts]), worst["ort"])
    ok_rounds = [(s, o) for s, o, c in zip(sides, orts, zip(checks["latch"], checks["ort"]))
                 if all(x is None or x["ok"] for x in c)]
    row = add_ort(row, ort, round_ratios([s for s, _ in ok_rounds], [o for _, o in ok_rounds]))
    for side in ("latch", "ort", "torch"):
        row[f"{side}_check"] = worst[side]
    row["check_failed"] = any(c is not None and not c["ok"] for c in worst.values())
    # Arithmetic done: Winograd's reduced multiply count (latch's), the direct count beside it.
    row["winograd_saved_flops"], row["winograd_runs"] = saving if saving else (None, None)
    row["latch_direct_gflops"] = row["latch_gflops"]
    if saving and row["flops"] and row["latch_gflops"] is not None:
        row["latch_gflops"] = ct.gflops(row["flops"] - saving[0], row["latch_once_ms"])
    if model in KV_MODELS:
        for side, key in (("latch", "latch_samples_ms"), ("ort", "ort_samples_ms"), ("torch", "torch_samples_ms")):
            ok = row.get(f"{side}_error" if side != "latch" else "latch_error") is None and row.get(key)
            row[f"{side}_tokens_per_s"] = tokens_per_s(row[key], batch) if ok else None
    return row, version


def tokens_per_s(samples, batch):
    """Tokens per second over timed steps of `batch` tokens each (every round's samples)."""
    return batch * len(samples) * 1e3 / sum(samples) if samples and sum(samples) > 0 else None


def fmt_diff(checked):
    if not checked:
        return "-"
    if checked["max_rel_diff"] is None:
        return "FAIL"
    return f"{checked['max_rel_diff']:.0e}" + ("" if checked["ok"] else "!")


def format_table(rows, by_ort, by_torch, args, versions, peaks):
    torch_version, ort_version = versions
    policy = os.environ.get("OMP_WAIT_POLICY", "OpenMP defaults")
    out = [f"compare_ort: latch once (LATCH_CACHE=memory) vs ONNX Runtime {ort_version or '?'} (node) vs PyTorch "
           f"{torch_version or '?'} eager ({policy}), median wall ms per step over "
           f"{ct.steps_text(args.repeat, args.rounds, alternating=True)} (after {args.warmup} warm-up), {args.threads} "
           f"thread(s) each, same weights and input; diff: largest difference from PyTorch's reference output over its "
           f"largest magnitude (! or FAIL: above {args.tolerance:g}, the row fails)",
           f"{'model':<14} {'batch':>5} {'size':>5} {'latch ms':>10} {'ort ms':>10} {'torch ms':>10} "
           f"{'latch/ort':>10} {'by round':>9} {'latch/torch':>12} {'latch diff':>10} {'ort diff':>8} "
           f"{'latch GF/s':>10} {'direct':>7} {'ort GF/s':>9} {'latch %pk':>9} {'ort %pk':>8}"
           + (f" {'passive ms':>10} {'l/passive':>10}" if args.torch_passive else "")]
    peak_gflops = median_peak(peaks)

    def share(g):
        return 100 * g / peak_gflops if g and peak_gflops else None

    for r in rows:
        line = (f"{r['model']:<14} {r['batch']:>5} {ct.fmt(r['size'], 'd'):>5} {ct.fmt(r['latch_once_ms'], '.2f'):>10} "
                f"{ct.fmt(r['ort_ms'], '.2f'):>10} {ct.fmt(r['torch_ms'], '.2f'):>10} {ct.fmt_ratio(r['ratio_ort'], 10)} "
                f"{ct.fmt_ratio(r['ratio_ort_by_round'], 9)} {ct.fmt_ratio(r['ratio'], 12)} "
                f"{fmt_diff(r['latch_check']):>10} {fmt_diff(r['ort_check']):>8} "
                f"{ct.fmt(r['latch_gflops'], '.1f'):>10} {ct.fmt(r['latch_direct_gflops'], '.1f'):>7} "
                f"{ct.fmt(r['ort_gflops'], '.1f'):>9} {ct.fmt(share(r['latch_gflops']), '.0f'):>9} "
                f"{ct.fmt(share(r['ort_gflops']), '.0f'):>8}")
        if args.torch_passive:
            line += f" {ct.fmt(r.get('torch_passive_ms'), '.2f'):>10} {ct.fmt_ratio(r.get('ratio_passive'), 10)}"
        errors = [f"{side} failed: {r[key]}" for side, key in
                  (("latch", "latch_error"), ("ort", "ort_error"), ("torch", "torch_error"),
                   ("torch passive", "torch_passive_error")) if r.get(key)]
        if errors:
            line += "  (" + "; ".join(errors) + ")"
        out.append("FAIL " + line if r["check_failed"] else line)
    for g in by_ort["per_batch"]:
        o, t = by_ort["per_batch"][g], by_torch["per_batch"].get(g, {})
        out.append(f"{'geomean batch ' + g:<26} {'':>10} {'':>10} {'':>10} {ct.fmt_ratio(o['geomean'], 10)} "
                   f"{ct.fmt_ratio(o['geomean_by_round'], 9)} {ct.fmt_ratio(t.get('geomean'), 12)}  (ort: {o['models']} "
                   f"model{'s' if o['models'] != 1 else ''}, largest {ct.fmt(o['max'], '.2f')}x; torch: {t.get('models', 0)})")
    o, t = by_ort["all"], by_torch["all"]
    out.append(f"{'geomean all':<26} {'':>10} {'':>10} {'':>10} {ct.fmt_ratio(o['geomean'], 10)} "
               f"{ct.fmt_ratio(o['geomean_by_round'], 9)} {ct.fmt_ratio(t['geomean'], 12)}  (ort: {o['models']} "
               f"row{'s' if o['models'] != 1 else ''}, largest {ct.fmt(o['max'], '.2f')}x; torch: {t['models']}); "
               f"below 1: latch is faster")
    generation = [r for r in rows if r["model"] in KV_MODELS]
    if generation:
        out.append(f"generation: tokens per second over every timed step ({args.new_tokens} new tokens a round, the "
                   f"cache growing from the context)")
        out.append(f"{'model':<14} {'batch':>5} {'ctx':>5} {'latch tok/s':>12} {'ort tok/s':>10} {'torch tok/s':>12} "
                   f"{'latch/torch':>12} {'latch/ort':>10}  (speed: above 1, latch generates faster)")
        for r in generation:
            lt, ot, tt = r["latch_tokens_per_s"], r["ort_tokens_per_s"], r["torch_tokens_per_s"]
            out.append(f"{r['model']:<14} {r['batch']:>5} {r['size']:>5} {ct.fmt(lt, '.1f'):>12} {ct.fmt(ot, '.1f'):>10} "
                       f"{ct.fmt(tt, '.1f'):>12} {ct.fmt_ratio(lt / tt if lt and tt else None, 12)} "
                       f"{ct.fmt_ratio(lt / ot if lt and ot else None, 10)}")
    out.append(peak_text(peaks))
    failed = sum(r["check_failed"] for r in rows)
    if failed:
        out.append(f"FAILED: {failed} row{'s' if failed != 1 else ''} with an output beyond the accuracy rule")
    return "\n".join(out)


def median_peak(peaks):
    measured = [p["gflops"] for p in peaks if p and not p.get("error") and p.get("gflops")]
    return statistics.median(measured) if measured else None


def peak_text(peaks):
    """The peak lines: the measured peak of every round (the median the %pk columns use) and
    the machine's theoretical peak."""
    measured = [p for p in peaks if p and not p.get("error")]
    if not measured:
        return ct.peak_line(peaks[0] if peaks else None)
    rounds = ", ".join(f"{p['gflops']:.1f}" for p in measured)
    line = ct.peak_line(dict(measured[0], gflops=median_peak(peaks))).replace(
        "peak: ", f"peak: median of the rounds' ({rounds}) ", 1)
    line += "; latch GF/s counts a Winograd convolution's reduced multiplies, direct: every multiply counted"
    t = measured[0].get("theoretical")
    if t:
        line += (f"\ntheoretical peak: {t['cores']} cores x {t['mhz']:.0f} MHz x {t['flops_per_cycle']} flops per cycle "
                 f"(2 x {t['lanes']} f32 lanes x {t['fma_units']} FMA units, assumed) = {t['gflops']:.1f} GFLOP/s; "
                 f"{t['gflops_used']:.1f} on the {t['cores_used']} core(s) the threads use; measured peak "
                 f"{100 * median_peak(peaks) / t['gflops_used']:.0f}% of it")
    else:
        line += "\ntheoretical peak: unknown (latch bench --peak could not read it from /proc/cpuinfo)"
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ct.add_common_arguments(parser, 5, 3)
    parser.add_argument("--suite", nargs="+", action="extend", help=f"{', '.join(SUITES)} or all (default images)")
    parser.add_argument("--quick", action="store_true", help="batch 1, one round of 3 steps (16 new tokens)")
    parser.add_argument("--weights", help="a state dict torch.save wrote (e.g. torchvision's weights) for every side")
    parser.add_argument("--tolerance", type=float, default=check_outputs.TOLERANCE,
                        help=f"largest relative output difference that passes (default {check_outputs.TOLERANCE:g})")
    parser.add_argument("--new-tokens", type=int, default=128, help="generation rows: timed steps (default 128)")
    parser.add_argument("--ort", default=DEFAULT_ORT, help=f"the onnxruntime-node package (default {DEFAULT_ORT})")
    parser.add_argument("--node", default="node")
    parser.add_argument("--ort-time", default=os.path.join(ct.HERE, "ort_time.js"))
    parser.add_argument("--onnx-dir", default=os.path.join("build", "onnx"),
                        help="where exported models, weights and inputs are kept (default build/onnx)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.rounds, args.repeat = args.batch or ["1"], 1, 3
        args.new_tokens = min(args.new_tokens, 16)
    _, batches, _, _ = ct.check_common_arguments(parser, args, [], [ct.LARGE_SIZE])
    if args.new_tokens < 1 or not args.tolerance > 0:
        parser.error("--new-tokens must be at least 1 and --tolerance above 0")
    try:
        plan = [(suite, model, size, batch) for suite, model, size in plan_rows(args, parser) for batch in batches]
    except ValueError as e:
        parser.error(f"--size takes integers, got {e}")
    if not os.path.isdir(args.ort):
        parser.error(f"{args.ort} is no onnxruntime-node package (make compare-ort installs it there)")
    if args.weights and not os.path.isfile(args.weights):
        parser.error(f"--weights {args.weights}: no such file")
    rows, torch_version, ort_version = [], None, None
    try:
        log = open(args.log, "a") if args.log else None
    except OSError as e:
        parser.error(f"cannot open --log {args.log}: {e}")
    with tempfile.TemporaryDirectory(prefix="compare-ort-") as tmp:
        prepared, peaks = {}, []
        sides, orts = {item: [] for item in plan}, {item: [] for item in plan}
        checks = {item: {"latch": [], "ort": [], "torch": []} for item in plan}
        for rnd in range(args.rounds):
            peaks.append(ct.run_peak(args, tmp, log))
            for item in plan:
                suite, model, size, batch = item
                print(f"compare_ort: {model} batch {batch} size {size} (round {rnd + 1} of {args.rounds}) ...",
                      file=sys.stderr, flush=True)
                if item not in prepared:
                    prepared[item] = prepare(args, model, size, batch, tmp, log)
                files, why = prepared[item]
                a = side_args(args, model)
                if files is None:
                    failed = (None, None, size, why, None)
                    sides[item].append(((failed, failed, None), None, None))
                    orts[item].append((failed, None))
                    continue
                # ORT first in every other round: neither side always runs right after the other.
                if rnd % 2:
                    orts[item].append(run_ort(a, model, batch, size, tmp, log, files))
                sides[item].append(ct.run_sides(a, model, batch, size, tmp, log, files))
                if not rnd % 2:
                    orts[item].append(run_ort(a, model, batch, size, tmp, log, files))
                checks[item]["latch"].append(check(sides[item][-1][0][0], files["latch_output"], files, args))
                checks[item]["torch"].append(check(sides[item][-1][0][1], files["torch_output"], files, args))
                checks[item]["ort"].append(check(orts[item][-1][0], files["ort_output"], files, args))
        for item in plan:
            suite, model, size, batch = item
            files = prepared[item][0]
            saving = winograd_saving(args, model, batch, size, tmp, log, files) if files else None
            row, version = build_row(suite, model, batch, size, sides[item], orts[item], checks[item], saving)
            rows.append(row)
            o_version = next((o[1] for o in orts[item] if o[1]), None)
            torch_version, ort_version = torch_version or version, ort_version or o_version
    if log:
        log.close()
    timed = [r for r in rows if r["model"] not in KV_MODELS]
    by_ort = ct.summarise(timed, "ratio_ort", "ratio_ort_min", "ratio_ort_by_round")
    by_torch = ct.summarise(timed)
    print(format_table(rows, by_ort, by_torch, args, (torch_version, ort_version), peaks))
    if args.json and not ct.write_json(args.json, {
            "compare_ort": 2, "clock": "wall", "threads": args.threads, "repeat": args.repeat, "rounds": args.rounds,
            "warmup": args.warmup, "tolerance": args.tolerance, "new_tokens": args.new_tokens, "torch": torch_version,
            "ort": ort_version, "peaks": peaks, "peak_gflops": median_peak(peaks), "rows": rows,
            "geomean_ort": by_ort, "geomean_torch": by_torch}):
        return 1
    if any(r["check_failed"] for r in rows):
        return 1
    ran = by_ort["all"]["models"] + sum(1 for r in rows if r["model"] in KV_MODELS and r["ratio_ort"] is not None)
    return 0 if ran > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
