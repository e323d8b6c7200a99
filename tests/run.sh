#!/bin/sh
# Runs each test program, then prints one closing line with the totals.
passed=0; failed=0; broken=0
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/'); f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  [ -n "$p" ] || p=0; [ -n "$f" ] || f=0
  passed=$((passed + p)); failed=$((failed + f))
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 40
    echo "FAIL $t (exit $rc)"
    [ "$f" -eq 0 ] && broken=$((broken + 1))
  else
    echo "ok   $t ($p checks)"
  fi
done
failed=$((failed + broken))
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
