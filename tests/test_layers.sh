#!/bin/sh
# The house rules of includes (README "Layout"): a folder includes only folders below it,
# and from another folder only that folder's one layer header. Fails naming each include
# that breaks them. tests/ may include anything.
cd "$(dirname "$0")/.." || exit 1
rank() {
  case "$1" in
    hlo) echo 0 ;; guards) echo 1 ;; cache) echo 2 ;; runtime) echo 3 ;;
    runtime/reference) echo 4 ;; runtime/cpu) echo 5 ;; minify) echo 6 ;; capture) echo 7 ;;
    bench) echo 8 ;; tools|python) echo 9 ;; include) echo 10 ;; *) echo -1 ;;
  esac
}
# A folder's subfolders that are not layers of their own (the zoo's models) count as it.
group() {
  case "$1" in bench/*) echo bench ;; python/*) echo python ;; *) echo "$1" ;; esac
}
layer_header() {
  case "$1" in
    include) echo include/latch.h ;; runtime/*) echo "$1/${1#runtime/}.h" ;;
    *) echo "$1/$1.h" ;;
  esac
}
checked=0; bad=0
for f in $(find hlo guards cache runtime minify capture tools bench python -name '*.[ch]' -o -name '*.cc' 2>/dev/null); do
  dir=$(group "$(dirname "$f")"); from=$(rank "$dir")
  for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
    case "$inc" in */*) ;; *) continue ;; esac   # same folder
    to_dir=$(group "$(dirname "$inc")"); to=$(rank "$to_dir")
    checked=$((checked + 1))
    [ "$to_dir" = "$dir" ] && continue
    if [ "$to" -lt 0 ] || [ "$to" -ge "$from" ] && [ "$to_dir" != include ]; then
      echo "FAIL $f includes $inc: a higher or unknown folder"; bad=$((bad + 1)); continue
    fi
    if [ "$inc" != "$(layer_header "$to_dir")" ] && [ "$inc" != "hlo/opcode.def" ]; then
      echo "FAIL $f includes $inc: not $to_dir's layer header $(layer_header "$to_dir")"; bad=$((bad + 1))
    fi
  done
done
# Settings are read once, by latch_options_init and latch_open (capture/settings.c), or by the
# command's own flags (tools/); every other file gets them passed down: no getenv.
for f in $(find hlo guards cache runtime minify capture bench python include -name '*.[ch]' -o -name '*.cc' 2>/dev/null); do
  [ "$f" = capture/settings.c ] && continue
  checked=$((checked + 1))
  if grep -n 'getenv' "$f" >/dev/null; then
    echo "FAIL $f reads the environment (getenv): settings belong in capture/settings.c"; bad=$((bad + 1))
  fi
done
# Header maps (as QBE's all.h): a function declared under a "/* ---- name.c ---- */" heading
# of a folder's header is defined in that folder's name.c. Headings that name several files
# or none (types shared by a group) check nothing.
for h in $(find hlo guards cache runtime minify capture tools -name '*.h' 2>/dev/null); do
  dir=$(dirname "$h")
  for pair in $(awk '
      /^\/\* ---- [a-z0-9_]+\.c ---- \*\/$/ { file = $3; next }
      /^\/\* ---- / { file = ""; next }
      file != "" && /^[a-z][a-z0-9_]*[ *][a-z0-9_ *]*\(/ && !/^(typedef|static|return) / {
        line = $0; sub(/\(.*/, "", line); n = split(line, w, /[ *]+/); print file ":" w[n]
      }' "$h"); do
    file=${pair%%:*}; name=${pair#*:}
    checked=$((checked + 1))
    if ! grep -Eq "^[a-z].*[ *]$name\(.*[^;]$|^[a-z].*[ *]$name\($" "$dir/$file" 2>/dev/null; then
      echo "FAIL $h declares $name under $file, which does not define it"; bad=$((bad + 1))
    fi
  done
done
echo "test_layers: $((checked - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
