#!/bin/sh
# `latch bench --peak N`: both kernels timed (the product and the convolution), the peak the
# better of the two, in the printed line and the JSON, with the machine's theoretical peak
# beside it (checked against /proc/cpuinfo read here); a bad N is an input error. BUILD comes
# from make test.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_peak.sh: check failed: $1" >&2; fi
}
LATCH_CACHE=memory "$BUILD/latch" bench --peak 192 --repeat 1 --json "$tmp/peak.json" > "$tmp/out.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ] || { cat "$tmp/out.txt" >&2; false; }'
check 'grep -Eq "f32 product 192x192 by 192x192 median [0-9.]+ ms, [0-9.]+ GFLOP/s; 3x3 convolution 128 to 128 features, 56x56, batch 8 median [0-9.]+ ms, [0-9.]+ GFLOP/s \(over 1 each\); peak [0-9.]+ GFLOP/s" "$tmp/out.txt"'
check '"$PYTHON" -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"n\"] == 192 and d[\"product_gflops\"] > 0 and d[\"conv_gflops\"] > 0, d
assert d[\"gflops\"] == max(d[\"product_gflops\"], d[\"conv_gflops\"]), d
flops = 2.0 * 8 * 128 * 128 * 9 * 56 * 56
assert abs(flops / (d[\"conv_median_ms\"] * 1e6) - d[\"conv_gflops\"]) < 1e-3 * d[\"conv_gflops\"], d
" "$tmp/peak.json"'
# The theoretical peak, worked out again from /proc/cpuinfo: distinct (physical id, core id)
# pairs x the first cpu MHz x 2 x (16 lanes with avx512f, else 8 with avx2 and fma) x 2 FMA
# units; absent only where the file lacks one of them.
check '"$PYTHON" -c "
import json, sys
d = json.load(open(sys.argv[1]))
cores, mhz, flags, phys = set(), None, None, 0
for line in open(\"/proc/cpuinfo\"):
    key, _, value = line.partition(\":\")
    key, value = key.strip(), value.strip()
    if key == \"physical id\": phys = value
    elif key == \"core id\": cores.add((phys, value))
    elif key == \"cpu MHz\" and mhz is None: mhz = float(value)
    elif key == \"flags\" and flags is None: flags = value.split()
n = len(cores) or sum(1 for l in open(\"/proc/cpuinfo\") if l.startswith(\"processor\"))
lanes = 16 if \"avx512f\" in flags else 8 if \"avx2\" in flags and \"fma\" in flags else 0
if not (mhz and lanes):
    assert \"theoretical\" not in d, d
    sys.exit(0)
t = d[\"theoretical\"]
assert t[\"cores\"] == n and t[\"lanes\"] == lanes and t[\"flops_per_cycle\"] == 4 * lanes, t
assert abs(t[\"gflops\"] - n * mhz * 4 * lanes / 1e3) < 1e-2, t
assert t[\"cores_used\"] == n and abs(t[\"gflops_used\"] - t[\"gflops\"]) < 1e-2, t
" "$tmp/peak.json"'
check 'grep -Eq "^theoretical peak: ([0-9]+ cores x [0-9]+ MHz x [0-9]+ flops per cycle .* GFLOP/s|unknown)" "$tmp/out.txt"'
"$BUILD/latch" bench --peak 0 > "$tmp/bad.txt" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "error" "$tmp/bad.txt" || { echo "rc $rc" >&2; cat "$tmp/bad.txt" >&2; false; }'
echo "tests/test_peak.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
