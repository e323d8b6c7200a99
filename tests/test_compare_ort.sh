#!/bin/sh
# bench/compare_ort.py without PyTorch, node or ONNX Runtime: fake `latch bench`, fake
# `torch_zoo.py` (time and export-onnx) and a fake ort_time.js (run by python instead of node)
# write canned JSON; the table, the ratios (pooled and by round), the geomeans and largest
# ratio per batch size, the GFLOP/s columns against the fake peak, the export done once per
# model and size, the failure rows, --json and the exit status are checked against figures
# worked out by hand.
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

# Fake latch: 10 ms for 'a', 40 ms for 'b', times the batch, at the size given; --peak: 50 GFLOP/s
# (the convolution's; the product's 40).
cat > "$tmp/latch" <<'PY'
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
out = a[a.index("--json") + 1]
if "--peak" in a:
    json.dump({"latch_peak": 1, "n": int(a[a.index("--peak") + 1]), "gflops": 50.0, "product_gflops": 40.0,
               "conv_gflops": 50.0}, open(out, "w"))
    sys.exit(0)
model, batch, size = a[a.index("--model") + 1], int(a[a.index("--batch") + 1]), int(a[a.index("--size") + 1])
ms = {"a": 10.0, "b": 40.0}.get(model, 1.0) * batch
samples = [ms]
if model == "r":  # rounds: its n-th run gives these samples; every run is logged in order.log
    log = sys.argv[0] + ".order"
    n = sum(1 for l in open(log) if l.startswith("latch")) if __import__("os").path.exists(log) else 0
    open(log, "a").write("latch\n")
    samples = [[10.0, 30.0], [20.0], [50.0, 60.0, 40.0]][n]
    ms = sorted(samples)[len(samples) // 2]
json.dump({"models": [{"name": model, "batch": batch, "size": size, "error": None,
                       "modes": {"once": {"median_ms": ms, "min_ms": min(samples), "samples_ms": samples}}}]},
          open(out, "w"))
PY
# Fake torch_zoo.py: time: 20 ms times the batch (5 with OMP_WAIT_POLICY=PASSIVE), 1e9 flops
# times the batch; export-onnx: a
# file, counted in exports.txt; 'noexport' cannot be exported.
cat > "$tmp/torch_zoo.py" <<'PY'
import json, sys
a = sys.argv[1:]
model = a[a.index("--model") + 1]
if a[0] == "export-onnx":
    if model == "noexport":
        raise SystemExit("torch_zoo.py: cannot export noexport")
    open(a[a.index("--out") + 1], "w").write("onnx")
    open(sys.argv[0] + ".exports", "a").write(f"{model} {a[a.index('--size') + 1]}\n")
    sys.exit(0)
batch, size, out = int(a[a.index("--batch") + 1]), int(a[a.index("--size") + 1]), a[a.index("--json") + 1]
import os
ms = (5.0 if os.environ.get("OMP_WAIT_POLICY") == "PASSIVE" else 20.0) * batch
json.dump({"torch": "fake", "models": {model: {"batch": batch, "size": size, "median_ms": ms,
                                               "min_ms": ms, "flops": 1e9 * batch}}}, open(out, "w"))
PY
# Fake ort_time.js: 5 ms for 'a', 50 ms for 'b', times the batch read from --shape.
cat > "$tmp/ort_time.py" <<'PY'
import json, sys
a = sys.argv[1:]
shape = [int(d) for d in a[a.index("--shape") + 1].split(",")]
onnx = a[a.index("--onnx") + 1]
assert open(onnx).read() == "onnx" and a[a.index("--threads") + 1] == "3" and len(shape) == 4
model = onnx.rsplit("/", 1)[1].split("-")[0]
ms = {"a": 5.0, "b": 50.0}.get(model, 1.0) * shape[0]
samples = [ms]
if model == "r":  # rounds: 8, then 12 and 16, then 9 (median 10 of the four, least 8)
    log = sys.argv[0].replace("ort_time.py", "latch.order")
    n = sum(1 for l in open(log) if l.startswith("ort")) if __import__("os").path.exists(log) else 0
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
run --model a,b,noexport --batch 1,8 --json "$tmp/out.json" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
cat "$tmp/out.txt"
check '[ $rc -eq 0 ]'
# a at batch 1: latch 10, ort 5, torch 20: 2.00x (every round the same: 2.00x by round too)
# and 0.50x; 1e9 flops: 100 and 200 GFLOP/s, 200% and 400% of the fake 50. b: 40, 50, 20:
# 0.80x, 2.00x; 25 and 20 GFLOP/s.
check 'grep -Eq "^a +1 +224 +10\.00 +5\.00 +20\.00 +2\.00x +2\.00x +0\.50x +100\.0 +200\.0 +200 +400$" "$tmp/out.txt"'
check 'grep -Eq "^b +8 +224 +320\.00 +400\.00 +160\.00 +0\.80x +0\.80x +2\.00x +25\.0 +20\.0 +50 +40$" "$tmp/out.txt"'
# latch/ORT: the geomean of 2.0 and 0.8 = 1.26, pooled and by round (noexport has no ORT
# time); latch/torch: of 0.5, 2.0 and noexport's 1/20 = 0.05^(1/3) = 0.37
check 'grep -Eq "^geomean batch 1 @224 +1\.26x +1\.26x +0\.37x +\(ort: 2 models, largest 2\.00x; torch: 3\)" "$tmp/out.txt"'
check 'grep -Eq "^geomean all +1\.26x +1\.26x +0\.37x +\(ort: 4 rows, largest 2\.00x; torch: 6\)" "$tmp/out.txt"'
check 'grep -q "^noexport .*ort failed: export: exit 1: .*cannot export noexport" "$tmp/out.txt"'
check 'grep -q "ONNX Runtime 9.9.9 (node) vs PyTorch fake eager" "$tmp/out.txt"'
check 'grep -q "^peak: 50.0 GFLOP/s, the better of one f32 2048x2048 product (40.0) and one 3x3 convolution 128->128 at 56x56, batch 8 (50.0)" "$tmp/out.txt"'
# one export per model and size, reused by the second batch size
check '[ "$(sort "$tmp/torch_zoo.py.exports" | tr "\n" " ")" = "a 224 b 224 " ]'
check '"$PYTHON" -c "
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r[\"model\"], r[\"batch\"]): r for r in d[\"rows\"]}
assert d[\"ort\"] == \"9.9.9\" and len(rows) == 6 and d[\"peak\"][\"gflops\"] == 50.0
assert rows[(\"b\", 8)][\"ratio_ort\"] == 0.8 and rows[(\"a\", 1)][\"ort_gflops\"] == 200.0
assert rows[(\"noexport\", 1)][\"ratio_ort\"] is None and rows[(\"noexport\", 1)][\"ratio\"] is not None
assert abs(d[\"geomean_ort\"][\"per_batch\"][\"8 @224\"][\"geomean\"] - 0.8 ** 0.5 * 2 ** 0.5) < 1e-12
" "$tmp/out.json"'
# --torch-passive: PyTorch again with OMP_WAIT_POLICY=PASSIVE (the fake reads it: 5 ms), latch
# against that last: 10 / 5 = 2.00x.
run --model a --batch 1 --torch-passive > "$tmp/passive.txt" 2>&1
check 'grep -Eq "^a +1 +224 +10\.00 +5\.00 +20\.00 .* 5\.00 +2\.00x$" "$tmp/passive.txt"'
# --rounds 3 (also the default): each side's samples of the three rounds pooled (latch: 10 30 20 50 60 40, median
# 35, least 10; ORT: 8 12 16 9, median 10.5, least 8), ORT run first in the second round only.
# By round: the fakes' round medians are 30, 20, 50 and 8, 16, 9: 3.75x, 1.25x and 5.56x, whose
# median is 3.75x where the pooled samples give 3.33x.
run --model r --batch 1 --rounds 3 --json "$tmp/rounds.json" > "$tmp/rounds.txt" 2>&1
check 'grep -Eq "^r +1 +224 +35\.00 +10\.50 +[0-9.]+ +3\.33x +3\.75x " "$tmp/rounds.txt"'
check 'grep -Eq "^geomean batch 1 @224 +3\.33x +3\.75x " "$tmp/rounds.txt"'
check 'grep -q "over 6 steps (2 in each of 3 rounds" "$tmp/rounds.txt"'
check '[ "$(tr "\n" " " < "$tmp/latch.order")" = "latch ort ort latch latch ort " ]'
check '"$PYTHON" -c "
import json, sys
r = json.load(open(sys.argv[1]))[\"rows\"][0]
assert r[\"rounds\"] == 3 and r[\"latch_min_ms\"] == 10.0 and r[\"ort_min_ms\"] == 8.0, r
assert sorted(r[\"latch_samples_ms\"]) == [10, 20, 30, 40, 50, 60] and r[\"ratio_ort_min\"] == 1.25, r
assert [round(x, 4) for x in r[\"ratio_ort_rounds\"]] == [3.75, 1.25, 5.5556] and r[\"ratio_ort_by_round\"] == 3.75, r
g = json.load(open(sys.argv[1]))[\"geomean_ort\"]
assert g[\"all\"][\"geomean_by_round\"] == 3.75 and g[\"per_batch\"][\"1 @224\"][\"geomean_by_round\"] == 3.75, g
" "$tmp/rounds.json"'
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
run --ort "$tmp/missing" > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "no onnxruntime-node package" "$tmp/bad.txt"'
echo "tests/test_compare_ort.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
