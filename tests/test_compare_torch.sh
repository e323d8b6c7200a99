#!/bin/sh
# bench/compare_torch.py without PyTorch (CI has python3 but no torch): fake `latch bench`
# and fake `torch_zoo.py time` programs write canned JSON, and the table, the geomeans, the
# failure rows, the size check, --json and the exit status are checked against figures
# worked out by hand. Also checks that the script imports without torch.
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_compare_torch.sh: check failed: $1" >&2; fi
}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "tests/test_compare_torch.sh: no $PYTHON (install-deps.sh installs python3)" >&2
  echo "tests/test_compare_torch.sh: 0 passed, 1 failed"
  exit 1
fi

# Fake latch: once-mode median 2 ms for 'a' and 8 ms for 'b' (times the batch), size 32 or
# the --size given; 'latchfail' exits 1 the way latch does for an unknown model; 'odd' reports
# size 40; --peak N reports 100 GFLOP/s.
cat > "$tmp/latch" <<'PY'
#!/usr/bin/env python3
import json, sys
a = sys.argv[1:]
if "--peak" in a:
    assert a[a.index("--peak") + 1] == "2048"
    json.dump({"latch_peak": 1, "n": 2048, "gflops": 100.0}, open(a[a.index("--json") + 1], "w"))
    sys.exit(0)
model, batch, out = a[a.index("--model") + 1], int(a[a.index("--batch") + 1]), a[a.index("--json") + 1]
assert a[0] == "bench" and a[a.index("--mode") + 1] == "once"
import os
assert os.environ["LATCH_CACHE"] == "memory" and os.environ["LATCH_THREADS"] == "3", "latch env"
if model == "latchfail":
    print("latch: error: bench: unknown model 'latchfail'", file=sys.stderr)
    sys.exit(1)
ms = {"a": 2.0, "b": 8.0}.get(model, 1.0) * batch
size = 40 if model == "odd" else int(a[a.index("--size") + 1]) if "--size" in a else 32
json.dump({"models": [{"name": model, "batch": batch, "size": size, "error": None,
                       "modes": {"once": {"median_ms": ms, "min_ms": ms / 2, "samples_ms": [ms]}}}]}, open(out, "w"))
PY
# Fake torch_zoo.py: 4 ms times the batch at whatever size it is given (2 ms with
# OMP_WAIT_POLICY=PASSIVE, which only --torch-passive sets), 4e6 flops times the batch;
# 'torchfail' raises.
cat > "$tmp/torch_zoo.py" <<'PY'
import json, sys
a = sys.argv[1:]
model, batch, out = a[a.index("--model") + 1], int(a[a.index("--batch") + 1]), a[a.index("--json") + 1]
size = int(a[a.index("--size") + 1])
assert a[0] == "time" and a[a.index("--threads") + 1] == "3"
import os
assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ.get("OMP_WAIT_POLICY", "PASSIVE") == "PASSIVE", "torch env"
if model == "torchfail":
    raise RuntimeError("fake torch failure")
ms = (2.0 if "OMP_WAIT_POLICY" in os.environ else 4.0) * batch
json.dump({"threads": 3, "torch": "fake", "models": {model: {"batch": batch, "size": 32 if model == "odd" else size,
                                                              "median_ms": ms, "min_ms": ms, "samples_ms": [ms],
                                                              "flops": 4e6 * batch}}},
          open(out, "w"))
PY
chmod +x "$tmp/latch"

unset OMP_WAIT_POLICY
run() {
  "$PYTHON" bench/compare_torch.py --latch "$tmp/latch" --python "$PYTHON" --torch-zoo "$tmp/torch_zoo.py" \
    --threads 3 --repeat 2 "$@"
}
run --model a,b,latchfail --model torchfail odd --batch 1,8 --json "$tmp/out.json" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
cat "$tmp/out.txt"
check '[ $rc -eq 0 ]'
# a: 2/4 = 0.5, b: 8/4 = 2, so each batch's geomean is 1.00; the min ratios are half of those.
# GFLOP/s: a at batch 1 does 4e6 flops in 2 ms (2.0, 2% of the fake peak's 100), b at batch 8
# 32e6 in 64 ms (0.5, 0%).
check 'grep -Eq "^a +1 +32 +2\.000 +4\.000 +0\.50x +0\.25x +2\.0 +2$" "$tmp/out.txt"'
check 'grep -Eq "^b +8 +32 +64\.000 +32\.000 +2\.00x +1\.00x +0\.5 +0$" "$tmp/out.txt"'
check 'grep -q "^peak: 100.0 GFLOP/s, one f32 2048x2048 product through latch" "$tmp/out.txt"'
check 'grep -Eq "^geomean batch 1 +1\.00x +0\.50x +\(2 models\)" "$tmp/out.txt"'
check 'grep -Eq "^geomean batch 8 +1\.00x +0\.50x +\(2 models\)" "$tmp/out.txt"'
check 'grep -Eq "^geomean all +1\.00x +0\.50x +\(4 rows\)" "$tmp/out.txt"'
check 'grep -q "^latchfail .*latch failed: exit 1: latch: error: bench: unknown model" "$tmp/out.txt"'
check 'grep -q "^torchfail .*torch failed: exit 1: .*RuntimeError: fake torch failure" "$tmp/out.txt"'
check 'grep -q "^odd .*torch failed: size 32 differs from latch.s 40" "$tmp/out.txt"'
check 'grep -q "wall ms per step over 2 steps (after 2 warm-up), 3 thread(s) each (torch OpenMP defaults)" "$tmp/out.txt"'
check '"$PYTHON" -c "
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r[\"model\"], r[\"batch\"]): r for r in d[\"rows\"]}
assert d[\"clock\"] == \"wall\" and d[\"threads\"] == 3 and d[\"torch\"] == \"fake\" and len(rows) == 10
assert rows[(\"b\", 8)][\"ratio\"] == 2.0 and rows[(\"a\", 1)][\"latch_once_ms\"] == 2.0
assert rows[(\"odd\", 1)][\"ratio\"] is None and rows[(\"latchfail\", 8)][\"latch_error\"]
assert abs(d[\"geomean\"][\"per_batch\"][\"8\"][\"geomean\"] - 1.0) < 1e-12
" "$tmp/out.json"'

# --torch-passive: a second PyTorch column (2 ms times the batch); explicit sizes run every
# model at each, summarised per batch and size.
run --model a --batch 1 --size default,64 --torch-passive > "$tmp/passive.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -Eq "^a +1 +32 +2\.000 +4\.000 +0\.50x .* 2\.000 +1\.00x$" "$tmp/passive.txt"'
check 'grep -Eq "^a +1 +64 +2\.000 +4\.000 +0\.50x" "$tmp/passive.txt" && grep -q "^geomean batch 1 @64 " "$tmp/passive.txt"'
# The default sizes: every model at its own, the image models at 224 too.
check '"$PYTHON" -c "
import sys
sys.path.insert(0, \"bench\")
import compare_torch as c
runs = c.plan_runs([\"mlp\", \"resnet18\"], [1, 8], [0, 224], False)
assert runs == [(0, 1, \"mlp\"), (0, 1, \"resnet18\"), (0, 8, \"mlp\"), (0, 8, \"resnet18\"), (224, 1, \"resnet18\"),
                (224, 8, \"resnet18\")], runs
assert c.plan_runs([\"mlp\"], [1], [64], True) == [(64, 1, \"mlp\")]
assert c.parse_sizes([\"default,224\"]) == [0, 224]
"'
# Nothing ran on both sides: exit 1, and the table still prints.
run --model latchfail torchfail --batch 1 > "$tmp/none.txt" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "^geomean all .*(0 rows)" "$tmp/none.txt"'
# Bad arguments: exit 2 with a message, no traceback.
run --batch 0 > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "must be at least 1" "$tmp/bad.txt" && ! grep -q Traceback "$tmp/bad.txt"'
"$PYTHON" bench/compare_torch.py --latch "$tmp/missing" > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "is not an executable" "$tmp/bad.txt"'
# Importable where torch is missing (torch blocked from import here).
check '"$PYTHON" -c "
import sys
sys.modules[\"torch\"] = None
sys.path.insert(0, \"bench\")
import compare_torch
assert compare_torch.geomean([]) is None and abs(compare_torch.geomean([0.25, 4.0]) - 1.0) < 1e-12
"'
echo "tests/test_compare_torch.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
