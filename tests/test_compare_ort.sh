#!/bin/sh
# bench/compare_ort.py without PyTorch, node or ONNX Runtime: fake `latch bench`, fake
# `torch_zoo.py` (time and export-onnx) and a fake ort_time.js (run by python instead of node)
# write canned JSON and outputs; the table, the ratios (pooled and by round), the geomeans and
# largest ratio per batch size, the GFLOP/s columns against the fake peaks (one per round) and
# the theoretical one, the export done once per model and size and read by every side, the
# output check (a planted difference fails its row, leaves it out of the geomeans and makes
# the exit status 1; one within the rule passes), the generation rows' tokens per second, the
# Winograd count from oneDNN's verbose lines, --json and the exit status are checked against
# figures worked out by hand.
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_compare_ort.sh: check failed: $1" >&2; fi
}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "tests/test_compare_ort.sh: no $PYTHON (install-deps.sh installs python3)" >&2
  echo "tests/test_compare_ort.sh: 0 passed, 1 failed"
  exit 1
fi

# npy.py: writes a float32 .npy of the given values, shape [len] (the fakes' outputs).
cat > "$tmp/npy.py" <<'PY'
import struct
def save(path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack(f"<{len(values)}f", *values))
PY
# Fake latch: 10 ms for 'a', 40 ms for 'b', times the batch; its output is the reference it
# finds beside its --input, except 'wrong' (off by 0.01 of 2: 5e-3, over the rule) and 'close'
# (off by 1e-4: 5e-5, within it); 'gpt2_small_gen': 4 ms a step. --peak: 50 GFLOP/s in its first run, 70
# in its second (the convolution's; the product's 40), a 2-core 2000 MHz AVX-512 machine.
cat > "$tmp/latch" <<'PY'
#!/usr/bin/env python3
import json, os, shutil, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
import npy
a = sys.argv[1:]
out = a[a.index("--json") + 1]
if "--peak" in a:
    log = sys.argv[0] + ".peaks"
    n = sum(1 for _ in open(log)) if os.path.exists(log) else 0
    open(log, "a").write("peak\n")
    conv = [50.0, 70.0, 60.0][n % 3]
    json.dump({"latch_peak": 1, "n": int(a[a.index("--peak") + 1]), "gflops": conv, "product_gflops": 40.0,
               "conv_gflops": conv, "theoretical": {"cores": 2, "mhz": 2000.0, "lanes": 16, "fma_units": 2,
               "flops_per_cycle": 64, "gflops": 256.0, "cores_used": 2, "gflops_used": 256.0}}, open(out, "w"))
    sys.exit(0)
model, batch, size = a[a.index("--model") + 1], int(a[a.index("--batch") + 1]), int(a[a.index("--size") + 1])
reference = a[a.index("--input") + 1].replace("input-", "output-")
assert a[a.index("--weights") + 1].endswith("/weights") and os.path.isdir(a[a.index("--weights") + 1])
if model in ("wrong", "close"):
    npy.save(a[a.index("--output") + 1], [1.0 + (0.01 if model == "wrong" else 1e-4), -2.0])
else:
    shutil.copy(reference, a[a.index("--output") + 1])
ms = {"a": 10.0, "b": 40.0, "gpt2_small_gen": 4.0}.get(model, 1.0) * batch
repeat = int(a[a.index("--repeat") + 1])
samples = [ms] * repeat if model == "gpt2_small_gen" else [ms]
if model == "r":  # rounds: its n-th run gives these samples; every run is logged in order.log
    log = sys.argv[0] + ".order"
    n = sum(1 for l in open(log) if l.startswith("latch")) if os.path.exists(log) else 0
    open(log, "a").write("latch\n")
    samples = [[10.0, 30.0], [20.0], [50.0, 60.0, 40.0]][n]
    ms = sorted(samples)[len(samples) // 2]
json.dump({"models": [{"name": model, "batch": batch, "size": size, "error": None,
                       "modes": {"once": {"median_ms": ms, "min_ms": min(samples), "samples_ms": samples}}}]},
          open(out, "w"))
PY
# Fake torch_zoo.py: time: 20 ms times the batch (5 with OMP_WAIT_POLICY=PASSIVE; 'gpt2_small_gen' 16 a
# step), 1e9 flops times the batch, the reference as its output; export-onnx: a directory with
# model.onnx, weights/, weights.pt (the state dict time reads), input-bB.npy and output-bB.npy
# ([1, -2]; 'zeros': [0, 0]), counted in exports.txt; 'noexport' cannot be exported.
cat > "$tmp/torch_zoo.py" <<'PY'
import json, os, shutil, sys
sys.path.insert(0, os.path.dirname(sys.argv[0]))
import npy
a = sys.argv[1:]
model = a[a.index("--model") + 1]
batch = int(a[a.index("--batch") + 1])
if a[0] == "export-onnx":
    if model == "noexport":
        raise SystemExit("torch_zoo.py: cannot export noexport")
    d = a[a.index("--out") + 1]
    os.makedirs(d + "/weights", exist_ok=True)
    open(d + "/model.onnx", "w").write("onnx")
    open(d + "/weights.pt", "w").write("state dict")
    npy.save(f"{d}/input-b{batch}.npy", [0.5, 0.25])
    npy.save(f"{d}/output-b{batch}.npy", [0.0, 0.0] if model == "zeros" else [1.0, -2.0])
    steps = a[a.index("--steps") + 1] if "--steps" in a else "-"
    open(sys.argv[0] + ".exports", "a").write(f"{model} {a[a.index('--size') + 1]} {batch} {steps}\n")
    sys.exit(0)
size, out = int(a[a.index("--size") + 1]), a[a.index("--json") + 1]
assert open(a[a.index("--state-dict") + 1]).read() == "state dict"
if "--output" in a:
    shutil.copy(a[a.index("--input") + 1].replace("input-", "output-"), a[a.index("--output") + 1])
ms = (5.0 if os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" else 20.0) * batch
repeat = int(a[a.index("--repeat") + 1])
samples = [16.0] * repeat if model == "gpt2_small_gen" else [ms]
ms = samples[0]
json.dump({"torch": "fake", "models": {model: {"batch": batch, "size": size, "median_ms": ms, "min_ms": ms,
                                               "samples_ms": samples, "flops": 1e9 * batch}}}, open(out, "w"))
PY
# Fake ort_time.js: 5 ms for 'a', 50 ms for 'b', 'wrong' and 'close' 1 ms, 'gpt2_small_gen' 8 a step,
# times the batch in the input's directory name; the reference as its output.
cat > "$tmp/ort_time.py" <<'PY'
import json, os, shutil, sys
a = sys.argv[1:]
onnx = a[a.index("--onnx") + 1]
assert open(onnx).read() == "onnx" and a[a.index("--threads") + 1] == "3"
shutil.copy(a[a.index("--input") + 1].replace("input-", "output-"), a[a.index("--output") + 1])
model = os.path.basename(os.path.dirname(onnx)).split("-")[0]
batch = int(a[a.index("--input") + 1].rsplit("-b", 1)[1].split(".")[0])
if model == "gpt2_small_gen":
    assert a[a.index("--past") + 1].endswith("/weights")
ms = {"a": 5.0, "b": 50.0, "gpt2_small_gen": 8.0}.get(model, 1.0) * batch
samples = [ms] * int(a[a.index("--repeat") + 1]) if model == "gpt2_small_gen" else [ms]
if model == "r":  # rounds: 8, then 12 and 16, then 9 (median 10 of the four, least 8)
    log = sys.argv[0].replace("ort_time.py", "latch.order")
    n = sum(1 for l in open(log) if l.startswith("ort")) if os.path.exists(log) else 0
    open(log, "a").write("ort\n")
    samples = [[8.0], [12.0, 16.0], [9.0]][n]
    ms = sorted(samples)[len(samples) // 2]
json.dump({"ort": "9.9.9", "median_ms": ms, "min_ms": min(samples), "samples_ms": samples},
          open(a[a.index("--json") + 1], "w"))
PY
chmod +x "$tmp/latch"
mkdir "$tmp/ort"

run() {
  "$PYTHON" bench/compare_ort.py --latch "$tmp/latch" --python "$PYTHON" --torch-zoo "$tmp/torch_zoo.py" \
    --node "$PYTHON" --ort-time "$tmp/ort_time.py" --ort "$tmp/ort" --onnx-dir "$tmp/onnx" --threads 3 --repeat 2 "$@"
}
run --model a,b,noexport --batch 1,8 --rounds 2 --json "$tmp/out.json" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
cat "$tmp/out.txt"
check '[ $rc -eq 0 ]'
# a at batch 1: latch 10, ort 5, torch 20: 2.00x (every round the same: 2.00x by round too)
# and 0.50x; outputs equal to the reference (diff 0); 1e9 flops: 100 and 200 GFLOP/s (no
# Winograd: the direct count too), 167% and 333% of the rounds' peaks' median (50 and 70: 60).
# b: 40, 50, 20: 0.80x, 2.00x; 25 and 20 GFLOP/s: 42% and 33%.
check 'grep -Eq "^a +1 +224 +10\.00 +5\.00 +20\.00 +2\.00x +2\.00x +0\.50x +0e\+00 +0e\+00 +100\.0 +100\.0 +200\.0 +167 +333$" "$tmp/out.txt"'
check 'grep -Eq "^b +8 +224 +320\.00 +400\.00 +160\.00 +0\.80x +0\.80x +2\.00x +0e\+00 +0e\+00 +25\.0 +25\.0 +20\.0 +42 +33$" "$tmp/out.txt"'
# latch/ORT: the geomean of 2.0 and 0.8 = 1.26, pooled and by round (noexport ran nowhere)
check 'grep -Eq "^geomean batch 1 @models +1\.26x +1\.26x +1\.00x +\(ort: 2 models, largest 2\.00x; torch: 2\)" "$tmp/out.txt"'
check 'grep -Eq "^geomean all +1\.26x +1\.26x +1\.00x +\(ort: 4 rows, largest 2\.00x; torch: 4\)" "$tmp/out.txt"'
check 'grep -q "^noexport .*latch failed: export: exit 1: .*cannot export noexport" "$tmp/out.txt"'
check 'grep -q "ONNX Runtime 9.9.9 (node) vs PyTorch fake eager" "$tmp/out.txt"'
# The peak of each round, their median, and the theoretical one: 60 / 256 = 23%.
check 'grep -q "^peak: median of the rounds. (50.0, 70.0) 60.0 GFLOP/s" "$tmp/out.txt"'
check 'grep -q "^theoretical peak: 2 cores x 2000 MHz x 64 flops per cycle (2 x 16 f32 lanes x 2 FMA units, assumed) = 256.0 GFLOP/s; 256.0 on the 2 core(s) the threads use; measured peak 23% of it" "$tmp/out.txt"'
# one export per model, size and batch, read by every side in both rounds
check '[ "$(sort "$tmp/torch_zoo.py.exports" | tr "\n" " ")" = "a 224 1 - a 224 8 - b 224 1 - b 224 8 - " ]'
check '"$PYTHON" -c "
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r[\"model\"], r[\"batch\"]): r for r in d[\"rows\"]}
assert d[\"ort\"] == \"9.9.9\" and len(rows) == 6 and d[\"peak_gflops\"] == 60.0, d
assert [p[\"gflops\"] for p in d[\"peaks\"]] == [50.0, 70.0]
assert rows[(\"b\", 8)][\"ratio_ort\"] == 0.8 and rows[(\"a\", 1)][\"ort_gflops\"] == 200.0
assert rows[(\"a\", 1)][\"latch_check\"][\"ok\"] and rows[(\"a\", 1)][\"latch_check\"][\"max_abs_diff\"] == 0
assert rows[(\"noexport\", 1)][\"ratio_ort\"] is None and not rows[(\"noexport\", 1)][\"check_failed\"]
assert abs(d[\"geomean_ort\"][\"per_batch\"][\"8 @models\"][\"geomean\"] - 0.8 ** 0.5 * 2 ** 0.5) < 1e-12
" "$tmp/out.json"'

# The output check: 'wrong' differs by 0.01 where the reference's largest magnitude is 2
# (5e-3 > 1e-3): its row FAILS, has no ratio, is left out of the geomean, exit status 1.
# 'close' differs by 1e-4 (5e-5): it passes and counts.
run --model a,wrong,close --batch 1 --rounds 1 --json "$tmp/check.json" > "$tmp/check.txt" 2>&1
rc=$?
check '[ $rc -eq 1 ]'
check 'grep -Eq "^FAIL wrong +1 +224 +1\.00 +1\.00 +20\.00 +- +- +- +5e-03! +0e\+00 .*latch failed: FAILED the output check: output differs from PyTorch.s: max abs diff 0\.01, relative 0\.005 > 0\.001" "$tmp/check.txt"'
check 'grep -Eq "^close +1 +224 +1\.00 +1\.00 +20\.00 +1\.00x +1\.00x +0\.05x +5e-05 +0e\+00 " "$tmp/check.txt"'
check 'grep -Eq "^geomean all +1\.41x +1\.41x +0\.16x +\(ort: 2 rows, largest 2\.00x; torch: 2\)" "$tmp/check.txt"'
check 'grep -q "^FAILED: 1 row with an output beyond the accuracy rule" "$tmp/check.txt"'
check '"$PYTHON" -c "
import json, sys
rows = {r[\"model\"]: r for r in json.load(open(sys.argv[1]))[\"rows\"]}
w = rows[\"wrong\"]
assert w[\"check_failed\"] and not w[\"latch_check\"][\"ok\"] and w[\"ort_check\"][\"ok\"], w
assert abs(w[\"latch_check\"][\"max_rel_diff\"] - 0.005) < 1e-6 and w[\"ratio_ort\"] is None and w[\"ratio\"] is None
assert rows[\"close\"][\"latch_check\"][\"ok\"] and not rows[\"close\"][\"check_failed\"]
" "$tmp/check.json"'
# A reference of zeros cannot tell right from wrong: every side fails.
run --model zeros --batch 1 --rounds 1 > "$tmp/zeros.txt" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "^FAIL zeros .*latch failed: FAILED the output check: PyTorch.s output is all zeros" "$tmp/zeros.txt"'
# A looser --tolerance lets it pass.
run --model wrong --batch 1 --rounds 1 --tolerance 0.01 > "$tmp/loose.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -Eq "^wrong +1 +224 .* 5e-03 +0e\+00 " "$tmp/loose.txt"'

# Generation: --new-tokens steps on every side (the export told warm-up + new tokens, 2 + 4),
# tokens per second over the timed steps: batch 2, latch 8 ms a step (250 tok/s), ORT 16 (125),
# torch 16 (125); latch/torch 2.00x, latch/ORT 2.00x; left out of the geomeans.
run --model gpt2_small_gen@128 --batch 2 --rounds 1 --new-tokens 4 > "$tmp/gen.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ]'
check 'grep -Eq "^gpt2_small_gen +2 +128 +250\.0 +125\.0 +125\.0 +2\.00x +2\.00x" "$tmp/gen.txt"'
check 'grep -q "^gpt2_small_gen 128 2 6$" "$tmp/torch_zoo.py.exports"'
check 'grep -Eq "^geomean all .*\(ort: 0 rows" "$tmp/gen.txt"'

# --rounds 3 (also the default): each side's samples of the three rounds pooled (latch: 10 30 20 50 60 40, median
# 35, least 10; ORT: 8 12 16 9, median 10.5, least 8), ORT run first in the second round only.
# By round: the fakes' round medians are 30, 20, 50 and 8, 16, 9: 3.75x, 1.25x and 5.56x, whose
# median is 3.75x where the pooled samples give 3.33x.
run --model r --batch 1 --rounds 3 --json "$tmp/rounds.json" > "$tmp/rounds.txt" 2>&1
check 'grep -Eq "^r +1 +224 +35\.00 +10\.50 +[0-9.]+ +3\.33x +3\.75x " "$tmp/rounds.txt"'
check 'grep -Eq "^geomean batch 1 @models +3\.33x +3\.75x " "$tmp/rounds.txt"'
check 'grep -q "over 6 steps (2 in each of 3 rounds" "$tmp/rounds.txt"'
check '[ "$(tr "\n" " " < "$tmp/latch.order")" = "latch ort ort latch latch ort " ]'
check '"$PYTHON" -c "
import json, sys
r = json.load(open(sys.argv[1]))[\"rows\"][0]
assert r[\"rounds\"] == 3 and r[\"latch_min_ms\"] == 10.0 and r[\"ort_min_ms\"] == 8.0, r
assert sorted(r[\"latch_samples_ms\"]) == [10, 20, 30, 40, 50, 60] and r[\"ratio_ort_min\"] == 1.25, r
assert [round(x, 4) for x in r[\"ratio_ort_rounds\"]] == [3.75, 1.25, 5.5556] and r[\"ratio_ort_by_round\"] == 3.75, r
g = json.load(open(sys.argv[1]))[\"geomean_ort\"]
assert g[\"all\"][\"geomean_by_round\"] == 3.75 and g[\"per_batch\"][\"1 @models\"][\"geomean_by_round\"] == 3.75, g
" "$tmp/rounds.json"'

# The Winograd count from oneDNN's verbose lines: a 2x3 Winograd run of 64 to 64 features at
# 56x56, batch 1 (231,211,008 direct flops, 16/36 of them done) and a direct one (counted
# whole), over 2 steps: 64,227,968 flops saved per step, half a Winograd run per step.
check '"$PYTHON" -c "
import sys
sys.path.insert(0, \"bench\")
import conv_arith
text = \"\"\"onednn_verbose,exec,cpu,convolution,jit_fp32_wino_2x3:avx512_core,forward_inference,src_f32::blocked:aBcd16b:f0,attr-scratchpad:user ,alg:convolution_winograd,mb1_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,9.5
onednn_verbose,exec,cpu,convolution,jit:avx512_core,forward_inference,src_f32::blocked:abcd:f0,attr-post-ops:eltwise_relu ,alg:convolution_direct,mb1_ic3oc64_ih224oh112kh7sh2dh0ph3_iw224ow112kw7sw2dw0pw3,17.5
onednn_verbose,create:cache_miss,cpu,convolution,jit_fp32_wino_2x3:avx512_core,forward_inference,,mb1_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,1\"\"\"
saved, runs = conv_arith.winograd_saving(text, 2)
assert abs(saved - 231211008 * (1 - 16 / 36) / 2) < 1 and runs == 0.5, (saved, runs)
assert conv_arith.direct_flops(\"mb8_g32ic32oc32_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1\") == 2 * 8 * 32 * 9 * 56 * 56
"'
run --model a --rounds 0 > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "rounds" "$tmp/bad.txt"'
# Nothing ran on ORT's side: exit 1. Bad arguments: exit 2, no traceback.
run --model noexport --batch 1 > "$tmp/none.txt" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "^geomean all .*(ort: 0 rows" "$tmp/none.txt"'
run --size default > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "exported at one size" "$tmp/bad.txt" && ! grep -q Traceback "$tmp/bad.txt"'
run --suite nosuch > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown nosuch" "$tmp/bad.txt" && ! grep -q Traceback "$tmp/bad.txt"'
run --ort "$tmp/missing" > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "no onnxruntime-node package" "$tmp/bad.txt"'
echo "tests/test_compare_ort.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
