#!/bin/sh
# Every zoo model as a traced function over batch sizes 1, 3 and 8 (--tiny configuration),
# the automatic shape policy, on the cpu backend: each must compile once per trace and no
# more (the other bindings are bound to the symbolic trace's executable), trace at most
# twice (gpt2 and gpt2_small_gen three times: the cache length turns symbolic first, then
# the batch leaves 1, which is specialized), and agree with trace-every at every size.
# Their symbolic entries run in segments (capture/segments.c): a new cache length compiles
# the moved ones (the concatenations and the attention), so their compiles exceed their
# traces; tests/test_segments_threads.c counts those. BUILD comes from make test.
BUILD=${BUILD:-build}
unset LATCH_CHECK LATCH_FAULT LATCH_NO_FUSION LATCH_RECOMPILE_LIMIT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
check() {
  if eval "$1"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "tests/test_zoo_sweep.sh: check failed: $1" >&2; fi
}
LATCH_CACHE=memory LATCH_BACKEND=cpu "$BUILD/latch" bench --sweep 1,3,8 --tiny --model all --mode every,once \
  --policy auto > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
check '[ $rc -eq 0 ] || { cat "$tmp/err.txt" >&2; false; }'
# per-size rows: model, mode, batch, ..., agree
size_row='^[a-z0-9_]+ +(every|once-auto) +[0-9]+ +[0-9]+\.[0-9]+ '
rows=$(grep -cE "$size_row" "$tmp/out.txt")
check '[ "$rows" -eq 96 ]' # 16 models x 2 modes x 3 sizes
check '[ "$(grep -E "$size_row" "$tmp/out.txt" | grep -vc " yes (")" -eq 0 ]'
# totals rows: "<model> once-auto <c> compiles <t> traces <ms> ms"
grep -E '^[a-z0-9_]+ +once-auto +[0-9]+ compiles' "$tmp/out.txt" > "$tmp/totals.txt"
check '[ "$(wc -l < "$tmp/totals.txt")" -eq 16 ]'
while read -r model mode compiles _ traces _; do
  limit=2
  case $model in gpt2|gpt2_small_gen) limit=3; same='[ "$compiles" -gt "$traces" ]' ;;
    *) same='[ "$compiles" -eq "$traces" ]' ;; esac
  check "$same"' && [ "$traces" -ge 1 ] && [ "$traces" -le $limit ] || { echo "$model: $compiles compiles, $traces traces" >&2; false; }'
done < "$tmp/totals.txt"
echo "tests/test_zoo_sweep.sh: $passed passed, $failed failed"
[ $failed -eq 0 ]
