#!/bin/sh
# Installs latch into a temporary prefix (make install PREFIX=...) and builds README's
# "How to embed latch" example against the installed header and shared library only, then
# runs it: what an embedder does; then the same linked with the archive (latch-static.pc).
# BUILD and SAN come from make test.
BUILD=${BUILD:-build}
SAN=${SAN:-}
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_embed.sh: check failed: $1" >&2; fi
}
make -s install BUILD="$BUILD" PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1
check '[ -f "$tmp/prefix/include/latch.h" ] && [ -f "$tmp/prefix/lib/liblatch.so" ] && [ -f "$tmp/prefix/lib/pkgconfig/latch.pc" ]'
awk '/<!-- embed-example -->/ { marked = 1; next }
     marked && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' README.md > "$tmp/mlp.c"
check '[ -s "$tmp/mlp.c" ]'
cc $SAN -std=c11 -Wall -Wextra -Werror -I"$tmp/prefix/include" "$tmp/mlp.c" -L"$tmp/prefix/lib" -llatch \
  -Wl,-rpath,"$tmp/prefix/lib" -o "$tmp/mlp" > "$tmp/cc.log" 2>&1
check '[ -x "$tmp/mlp" ] || { cat "$tmp/cc.log" >&2; false; }'
LATCH_BACKEND=reference "$tmp/mlp" > "$tmp/out.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ]'
cat "$tmp/out.txt"
check '[ "$(grep -c "(sum 1.000)" "$tmp/out.txt")" -eq 4 ]'
check 'grep -q "^1 graph compiled, 6 ops traced" "$tmp/out.txt"'
# Linked statically through latch-static.pc, README's second line; then run with the shared
# library gone, so a binary that still needed it would fail to start.
cc $SAN -std=c11 -Wall -Wextra -Werror "$tmp/mlp.c" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs latch-static) -o "$tmp/mlp-static" > "$tmp/cc-static.log" 2>&1
check '[ -x "$tmp/mlp-static" ] || { cat "$tmp/cc-static.log" >&2; false; }'
rm -f "$tmp/prefix/lib/liblatch.so"
LATCH_BACKEND=reference "$tmp/mlp-static" > "$tmp/out-static.txt" 2>&1
rc=$?
check '[ $rc -eq 0 ] || { cat "$tmp/out-static.txt" >&2; false; }'
check 'cmp -s "$tmp/out.txt" "$tmp/out-static.txt"'
echo "tests/test_embed.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
