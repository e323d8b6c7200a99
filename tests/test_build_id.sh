#!/bin/sh
# The compile cache's key carries the build identity: a copy of the tree is built,
# fills a disk cache, then has the constant in capture/lower_nn.c's lower_relu changed and is
# rebuilt. The same program with the same cache must then compile again (a miss) and give
# the new output, never the old build's executable. The copy reuses this build's objects
# (cp -p keeps their times), so only the changed files compile again. BUILD and SAN come
# from make test.
BUILD=${BUILD:-build}
SAN=${SAN:-}
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_build_id.sh: check failed: $1" >&2; fi
}
tree="$tmp/tree"
mkdir -p "$tree/$BUILD"
cp -pR Makefile hlo guards cache runtime minify capture include tools bench "$tree/"
[ -d "$BUILD/obj" ] && cp -pR "$BUILD/obj" "$tree/$BUILD/"
[ -d "$BUILD/gen" ] && cp -pR "$BUILD/gen" "$tree/$BUILD/"
build() { make -s -C "$tree" BUILD="$BUILD" SAN="$SAN" "$BUILD/latch" > "$tmp/make.log" 2>&1 || cat "$tmp/make.log" >&2; }
# The mlp's graphs, through the disk cache; prints the run's compile and disk-load counts.
run() {
  (cd "$tmp" && LATCH_CACHE=disk LATCH_CACHE_DIR="$tmp/cache" "$tree/$BUILD/latch" bench --model mlp --mode every \
    --repeat 1 --json "$tmp/$1.json" --output "$tmp/$1.npy" > "$tmp/$1.log" 2>&1)
}
compiles() { grep -o '"compiles": [0-9]*' "$tmp/$1.json" | awk '{ n += $2 } END { print n + 0 }'; }
build
check '[ -x "$tree/$BUILD/latch" ]'
id1=$(cat "$tree/$BUILD/gen/build_id.h")
run cold; check '[ "$(compiles cold)" -gt 0 ]'
run warm; check '[ "$(compiles warm)" -eq 0 ]'                 # the cache works: nothing compiled
check 'cmp -s "$tmp/cold.npy" "$tmp/warm.npy"'
# relu(x) = max(x, 0) becomes max(x, 0.25): another function, the same graph key as before.
sed -i '/^static hlo_instr \*lower_relu/,/^}/ s/full_like(comp, x, 0, diag)/full_like(comp, x, 0.25, diag)/' \
  "$tree/capture/lower_nn.c"
check 'grep -q "full_like(comp, x, 0.25, diag)" "$tree/capture/lower_nn.c"'
build
check '[ "$(cat "$tree/$BUILD/gen/build_id.h")" != "$id1" ]'
run changed
check '[ "$(compiles changed)" -gt 0 ]'                         # a miss, not the old executable
check '! cmp -s "$tmp/cold.npy" "$tmp/changed.npy"'             # and the new code's output
echo "tests/test_build_id.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
