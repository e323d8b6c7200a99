#!/bin/sh
# Opt-in (`make minify-scale`): the minifier at scale. A generated step of 20,000 elementwise
# ops, reductions and broadcasts over eight f32[65536,65536] parameters (128 GiB, never
# allocated: a compile check reads no input data) with one atan2 at op 12,345, minified under
# LATCH_FAULT=compile:atan2. Prints wall time and peak memory (GNU time) and checks the repro
# is the atan2 alone; the figures are printed, not asserted.
set -u
BUILD=${BUILD:-build}
LATCH=$(cd "$(dirname "$BUILD/latch")" && pwd)/latch
OPS=${OPS:-20000}
DIM=${DIM:-65536}
WORK=$(mktemp -d /tmp/latch-scale-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
awk -v ops="$OPS" -v dim="$DIM" -v pos=12345 'BEGIN {
  srand(7);
  printf "HloModule big\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";
  printf "ENTRY main {\n";
  np = 8; for (i = 0; i < np; i++) { printf "  p%d = f32[%d,%d] parameter(%d)\n", i, dim, dim, i; v[i] = "p" i; }
  n = np; printf "  zero = f32[] constant(0)\n";
  split("add multiply subtract maximum minimum", bin, " "); split("tanh negate abs exponential", un, " ");
  for (i = 0; i < ops; i++) {
    w = n < 16 ? n : 16; x = v[n - 1 - int(rand() * w)]; y = v[n - 1 - int(rand() * w)]; name = "v" i;
    if (i == pos) printf "  %s = f32[%d,%d] atan2(%s, %s)\n", name, dim, dim, x, y;
    else if (i % 97 == 50) { printf "  r%d = f32[%d] reduce(%s, zero), dimensions={1}, to_apply=sum\n", i, dim, x;
      printf "  %s = f32[%d,%d] broadcast(r%d), dimensions={0}\n", name, dim, dim, i; }
    else if (rand() < 0.3) printf "  %s = f32[%d,%d] %s(%s)\n", name, dim, dim, un[1 + int(rand() * 4)], x;
    else printf "  %s = f32[%d,%d] %s(%s, %s)\n", name, dim, dim, bin[1 + int(rand() * 5)], x, y;
    v[n++] = name; used[x] = 1; used[y] = 1;
  }
  out = ""; shape = ""; k = 0;
  for (i = np; i < n; i++) if (!(v[i] in used)) {
    out = out (k ? ", " : "") v[i]; shape = shape (k ? ", " : "") "f32[" dim "," dim "]"; k++ }
  printf "  ROOT root = (%s) tuple(%s)\n}\n", shape, out;
}' > "$WORK/big.hlo"
"$LATCH" parse "$WORK/big.hlo" | head -2
LATCH_FAULT=compile:atan2 /usr/bin/time -f "minify-scale: %e s wall, %U s user, %S s system, %M KB peak" \
  "$LATCH" minify "$WORK/big.hlo" --check compile -o "$WORK/repro" --quiet || { echo "FAIL: latch minify exited $?"; exit 1; }
cat "$WORK/repro/report.txt"
grep -q ' atan2(' "$WORK/repro/repro.hlo" || { echo "FAIL: the repro has no atan2"; exit 1; }
ops=$(grep -c -v -E '^(HloModule|ENTRY|})|^$| parameter\(| constant\(' "$WORK/repro/repro.hlo")
[ "$ops" = 1 ] || { echo "FAIL: the repro is not the atan2 alone"; cat "$WORK/repro/repro.hlo"; exit 1; }
echo "ok: $OPS ops minified to the atan2 alone"
