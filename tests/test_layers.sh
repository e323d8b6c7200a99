#!/bin/sh
# The house rules of includes (README "Layout"): a folder includes only folders below it,
# and from another folder only that folder's one layer header; and the headers' maps (below).
# Fails naming each include or declaration that breaks them. tests/ may include anything.
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

# Header maps (QBE's all.h): a declaration under a heading that names the files defining it
# (`/* ---- value.c ---- */`, `/* (kept.c) ...`, `/* pooling.c: ...`, `/* ---- nodes (node.c) ---- */`)
# must be defined in one of them. A heading naming no file (`/* ---- the store ---- */`) ends
# the previous one and maps nothing. Declarations: prototypes and externs at column 0,
# `MACRO(name);` lines; definitions: a line at column 0 that opens name's body or gives its value.
map_decls() {
  awk '
    # The files a heading names: a list opening it ("a.c", "(a.c, b.c) text", "a.c: text"),
    # or, in a "---- words ----" heading, a list in parentheses; "-" for a heading naming none.
    function list_at(t,   files) {
      files = ""; sub(/^\(/, "", t)
      while (match(t, /^[a-zA-Z0-9_.*\/]+\.c/)) {
        files = files " " substr(t, 1, RLENGTH); t = substr(t, RLENGTH + 1)
        if (t ~ /^(, | and )/) { sub(/^(, | and )/, "", t); continue }
        break
      }
      return files
    }
    function heading_files(t,   files) {
      if (t !~ /^---- /) return list_at(t)
      sub(/^---- /, "", t); sub(/ ----.*$/, "", t)
      files = list_at(t)
      if (files == "" && match(t, /\([a-zA-Z0-9_.*\/]+\.c[^)]*\)/)) files = list_at(substr(t, RSTART))
      return files == "" ? "-" : files
    }
    /^\/\* / && !in_comment {
      text = substr($0, 4); f = heading_files(text)
      if (f == "-") files = ""; else if (f != "") files = f
    }
    { line = $0 }
    in_comment { if (line ~ /\*\//) in_comment = 0; next }
    line ~ /^\/\*/ { if (line !~ /\*\//) in_comment = 1; next }
    files == "" { next }
    line ~ /^[ \t#{}]/ || line ~ /^(typedef|static|struct [a-z_0-9]+ \{|enum|union)/ { next }
    line ~ /^[A-Z_0-9]+\([a-z_0-9]+\);/ { n = line; sub(/^[A-Z_0-9]+\(/, "", n); sub(/\).*/, "", n); print FILENAME "|" files "|" n; next }
    line ~ /^[a-z].*[a-z_0-9]\(/ { n = line; sub(/\(.*/, "", n); sub(/.*[^a-zA-Z_0-9]/, "", n); print FILENAME "|" files "|" n; next }
    line ~ /^extern .*;/ { n = line; sub(/[[;].*/, "", n); sub(/.*[^a-zA-Z_0-9]/, "", n); print FILENAME "|" files "|" n; next }
  ' "$1"
}
defined_in() { # name file...: a definition at column 0 (not a prototype)
  name=$1; shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    grep -Eq "^([a-zA-Z_].*[^a-zA-Z_0-9])?$name( *\(.*[^;]$| *\(.*\) *\{| *(\[[^]]*\])? *=)|^[A-Z_0-9]+\($name\)" "$f" && return 0
  done
  return 1
}
decls=$(mktemp); trap 'rm -f "$decls"' EXIT
for h in $(find hlo guards cache runtime minify capture include tools -name '*.h' | sort); do
  dir=$(dirname "$h")
  map_decls "$h" > "$decls"
  while IFS='|' read -r hdr files name; do
    paths=""
    for f in $files; do case "$f" in */*) paths="$paths $f" ;; *) paths="$paths $dir/$f" ;; esac; done
    checked=$((checked + 1))
    # shellcheck disable=SC2086
    if ! defined_in "$name" $paths; then
      echo "FAIL $hdr: $name is under the heading of$files but defined in none of them"; bad=$((bad + 1))
    fi
  done < "$decls"
done
# And each library file is named by its folder's headers (a heading, or the opening's list;
# `pass_*.c` names every pass file): a header's map leaves no file out.
for d in hlo guards cache runtime runtime/reference runtime/cpu minify capture; do
  names=$(cat "$d"/*.h | grep -o '[a-zA-Z0-9_*]*\.c\b' | sort -u)
  for c in "$d"/*.c; do
    f=$(basename "$c"); found=0
    for n in $names; do [ "$n" = "*.c" ] || case "$f" in $n) found=1; break ;; esac; done
    checked=$((checked + 1))
    [ $found = 1 ] || { echo "FAIL $c: no header of $d/ names it"; bad=$((bad + 1)); }
  done
done
echo "test_layers: $((checked - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
