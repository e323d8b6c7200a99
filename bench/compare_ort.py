#!/usr/bin/python3
"""latch's trace-once mode against ONNX Runtime and PyTorch eager on the same models.

  bench/compare_ort.py [--model M ...] [--batch 1,8] [--size 224] [--repeat N] [--rounds N] [--warmup N] [--threads N]
                       [--ort DIR] [--node node] [--onnx-dir DIR] [--peak N] [--torch-passive] [--json FILE]

Per size, model and batch: latch and PyTorch as compare_torch.py times them (its functions),
then the same torchvision model exported by Debian's torch.onnx (`torch_zoo.py export-onnx`,
once per model and size into --onnx-dir, the batch dim dynamic) and run by ONNX Runtime from npm
(`bench/ort_time.js`: the same thread count, untimed warm-up runs, then the median of --repeat
wall times on one input). Prints median ms per step for the three, latch/ORT and latch/torch
per row (below 1: latch is faster), their geomeans and largest ratio per batch size, and the
effective GFLOP/s of latch and ORT (the convolutions' and products' flops counted by
torch_zoo.py, over the median step) next to the product peak measured through latch in the
same run. A model that fails on a side is printed with its error and left out of that side's
geomeans; exit status 1 only if no row ran on latch and ORT both, 2 for bad arguments.

--rounds N (default 3) runs the whole plan N times, ORT first in every other round, and pools
each side's samples of a row over the rounds: this machine's speed drifts over minutes, and a
row timed once sees one moment of it. The "by round" column pairs the sides within each round
instead: latch's median over ORT's in the same round (the two ran back to back), the median
of those ratios over the rounds. A slow round then weighs on both sides of its own ratio,
where pooled samples let it fall on one side only (a round that slowed latch but not ORT
moves latch's pooled median, and the other way round).

Opt-in (`make compare-ort`): needs python3-torch, python3-torchvision, node, and
onnxruntime-node installed with `npm install --ignore-scripts onnxruntime-node` (the Makefile
puts it under build/ort). Imports neither torch nor ORT itself, so the table logic is tested
with fake children (tests/test_compare_ort.sh).
"""
import argparse
import os
import statistics
import sys
import tempfile

import compare_torch as ct

DEFAULT_ORT = os.path.join("build", "ort", "node_modules", "onnxruntime-node")


def input_shape(model, batch, size):
    """The ONNX input's shape: images [B, 3, S, S], mlp's flattened [B, 784]."""
    return [batch, 784] if model == "mlp" else [batch, 3, size, size]


def export_onnx(args, model, size, log):
    """The model's ONNX file (exported on first use), or (None, why)."""
    path = os.path.join(args.onnx_dir, f"{model}-{size}.onnx")
    if os.path.exists(path):
        return path, None
    os.makedirs(args.onnx_dir, exist_ok=True)
    argv = [args.python, args.torch_zoo, "export-onnx", "--model", model, "--size", str(size), "--out", path]
    rc, output = ct.run_child(argv, dict(os.environ), args.timeout, log)
    if rc != 0 or not os.path.exists(path):
        return None, output if rc is None else f"export: exit {rc}: {ct.tail(output)}"
    return path, None


def run_ort(args, model, batch, size, tmp, log):
    """ORT's (median ms, samples, size, error, min ms) and its version."""
    onnx, err = export_onnx(args, model, size, log)
    if not onnx:
        return (None, None, None, err, None), None
    path = os.path.join(tmp, f"ort-{model}-{batch}-{size}.json")
    argv = [args.node, args.ort_time, "--ort", os.path.abspath(args.ort), "--onnx", onnx, "--shape",
            ",".join(str(d) for d in input_shape(model, batch, size)), "--repeat", str(args.repeat),
            "--warmup", str(args.warmup), "--threads", str(args.threads), "--json", path]
    rc, output = ct.run_child(argv, dict(os.environ, OMP_NUM_THREADS=str(args.threads)), args.timeout, log)
    if rc != 0:
        return (None, None, None, output if rc is None else f"exit {rc}: {ct.tail(output)}", None), None
    doc, err = ct.read_json(path)
    if doc is None or doc.get("median_ms") is None:
        return (None, None, None, err or "no median in ort_time's JSON", None), None
    return (doc["median_ms"], doc.get("samples_ms"), size, None, doc.get("min_ms")), doc.get("ort")


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


def format_table(rows, by_ort, by_torch, args, versions, peak):
    torch_version, ort_version = versions
    policy = os.environ.get("OMP_WAIT_POLICY", "OpenMP defaults")
    out = [f"compare_ort: latch once (LATCH_CACHE=memory) vs ONNX Runtime {ort_version or '?'} (node) vs PyTorch "
           f"{torch_version or '?'} eager ({policy}), median wall ms per step over {ct.steps_text(args.repeat, args.rounds, alternating=True)} (after "
           f"{args.warmup} warm-up), {args.threads} thread(s) each",
           f"{'model':<14} {'batch':>5} {'size':>5} {'latch ms':>10} {'ort ms':>10} {'torch ms':>10} "
           f"{'latch/ort':>10} {'by round':>9} {'latch/torch':>12} {'latch GF/s':>10} {'ort GF/s':>9} {'latch %pk':>9} "
           f"{'ort %pk':>8}"
           + (f" {'passive ms':>10} {'l/passive':>10}" if args.torch_passive else "")]
    peak_gflops = peak.get("gflops") if peak else None

    def share(g):
        return 100 * g / peak_gflops if g and peak_gflops else None

    for r in rows:
        line = (f"{r['model']:<14} {r['batch']:>5} {ct.fmt(r['size'], 'd'):>5} {ct.fmt(r['latch_once_ms'], '.2f'):>10} "
                f"{ct.fmt(r['ort_ms'], '.2f'):>10} {ct.fmt(r['torch_ms'], '.2f'):>10} {ct.fmt_ratio(r['ratio_ort'], 10)} "
                f"{ct.fmt_ratio(r['ratio_ort_by_round'], 9)} {ct.fmt_ratio(r['ratio'], 12)} {ct.fmt(r['latch_gflops'], '.1f'):>10} "
                f"{ct.fmt(r['ort_gflops'], '.1f'):>9} {ct.fmt(share(r['latch_gflops']), '.0f'):>9} "
                f"{ct.fmt(share(r['ort_gflops']), '.0f'):>8}")
        if args.torch_passive:
            line += f" {ct.fmt(r.get('torch_passive_ms'), '.2f'):>10} {ct.fmt_ratio(r.get('ratio_passive'), 10)}"
        errors = [f"{side} failed: {r[key]}" for side, key in
                  (("latch", "latch_error"), ("ort", "ort_error"), ("torch", "torch_error"),
                   ("torch passive", "torch_passive_error")) if r.get(key)]
        if errors:
            line += "  (" + "; ".join(errors) + ")"
        out.append(line)
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
    out.append(ct.peak_line(peak))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ct.add_common_arguments(parser, 5, 3)
    parser.add_argument("--ort", default=DEFAULT_ORT, help=f"the onnxruntime-node package (default {DEFAULT_ORT})")
    parser.add_argument("--node", default="node")
    parser.add_argument("--ort-time", default=os.path.join(ct.HERE, "ort_time.js"))
    parser.add_argument("--onnx-dir", default=os.path.join("build", "onnx"),
                        help="where exported models are kept (default build/onnx)")
    args = parser.parse_args(argv)
    models, batches, sizes, _ = ct.check_common_arguments(parser, args, ct.IMAGE_MODELS, [ct.LARGE_SIZE])
    if 0 in sizes:
        parser.error("--size: ONNX models are exported at one size: give it (default 224)")
    if not os.path.isdir(args.ort):
        parser.error(f"{args.ort} is no onnxruntime-node package (make compare-ort installs it there)")
    rows, torch_version, ort_version = [], None, None
    try:
        log = open(args.log, "a") if args.log else None
    except OSError as e:
        parser.error(f"cannot open --log {args.log}: {e}")
    with tempfile.TemporaryDirectory(prefix="compare-ort-") as tmp:
        peak = ct.run_peak(args, tmp, log)
        plan = ct.plan_runs(models, batches, sizes, True)
        sides, orts = {item: [] for item in plan}, {item: [] for item in plan}
        for rnd in range(args.rounds):
            for size, batch, model in plan:
                print(f"compare_ort: {model} batch {batch} size {size} (round {rnd + 1} of {args.rounds}) ...",
                      file=sys.stderr, flush=True)
                # ORT first in every other round: neither side always runs right after the other.
                if rnd % 2:
                    orts[(size, batch, model)].append(run_ort(args, model, batch, size, tmp, log))
                sides[(size, batch, model)].append(ct.run_sides(args, model, batch, size, tmp, log))
                if not rnd % 2:
                    orts[(size, batch, model)].append(run_ort(args, model, batch, size, tmp, log))
        for item in plan:
            size, batch, model = item
            row, version = ct.row_from_rounds(model, batch, size, sides[item])
            rows.append(add_ort(row, ct.merge_rounds([o[0] for o in orts[item]]), round_ratios(sides[item], orts[item])))
            o_version = next((o[1] for o in orts[item] if o[1]), None)
            torch_version, ort_version = torch_version or version, ort_version or o_version
    if log:
        log.close()
    by_ort, by_torch = ct.summarise(rows, "ratio_ort", "ratio_ort_min", "ratio_ort_by_round"), ct.summarise(rows)
    print(format_table(rows, by_ort, by_torch, args, (torch_version, ort_version), peak))
    if args.json and not ct.write_json(args.json, {
            "compare_ort": 1, "clock": "wall", "threads": args.threads, "repeat": args.repeat, "rounds": args.rounds, "warmup": args.warmup,
            "torch": torch_version, "ort": ort_version, "peak": peak, "rows": rows,
            "geomean_ort": by_ort, "geomean_torch": by_torch}):
        return 1
    return 0 if by_ort["all"]["models"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
