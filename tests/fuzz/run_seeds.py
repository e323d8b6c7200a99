#!/usr/bin/env python3
"""Seeds for the run fuzzer (tests/fuzz/fuzz_run.c): the real dumps of at most MAX_BYTES,
and the HLO modules the C tests write as string literals ("HloModule m\\n" ADD_F32 "ENTRY
..."), their macros expanded from the file's own #defines. Each seed is one file.
Usage: run_seeds.py CORPUS_DIR TESTS_DIR OUT_DIR"""
import ast
import os
import re
import sys

MAX_BYTES = 4096
TOKEN = re.compile(r'\s*(?:("(?:[^"\\\n]|\\.)*")|([A-Za-z_][A-Za-z0-9_]*)|(//[^\n]*)|(/\*.*?\*/))', re.S)


def literal(text):
    return ast.literal_eval(text)


def defines(source):
    """#define NAME "..." "..." (continued lines joined): NAME -> the text."""
    out = {}
    joined = source.replace('\\\n', ' ')
    for m in re.finditer(r'^#define\s+([A-Z_][A-Z0-9_]*)\s+((?:"(?:[^"\\\n]|\\.)*"\s*)+)$', joined, re.M):
        out[m.group(1)] = ''.join(literal(s) for s in re.findall(r'"(?:[^"\\\n]|\\.)*"', m.group(2)))
    return out


def modules(source):
    """Each run of adjacent literals and macro names whose text starts with HloModule."""
    macros = defines(source)
    found = []
    for start in re.finditer(r'"HloModule', source):
        pos, parts = start.start(), []
        while True:
            m = TOKEN.match(source, pos)
            if not m:
                break
            if m.group(1):
                parts.append(literal(m.group(1)))
            elif m.group(2) and m.group(2) in macros:
                parts.append(macros[m.group(2)])
            elif not (m.group(3) or m.group(4)):
                break
            pos = m.end()
        text = ''.join(parts)
        if 'ENTRY' in text and len(text) <= MAX_BYTES:
            found.append(text)
    return found


def main():
    corpus, tests, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        if name.endswith('.hlo') and os.path.getsize(path) <= MAX_BYTES:
            with open(path) as f, open(os.path.join(out, 'corpus_' + name), 'w') as g:
                g.write(f.read())
            n += 1
    for name in sorted(os.listdir(tests)):
        if not name.endswith('.c'):
            continue
        with open(os.path.join(tests, name), errors='replace') as f:
            source = f.read()
        for i, text in enumerate(modules(source)):
            with open(os.path.join(out, '%s_%d' % (name[:-2], i)), 'w') as g:
                g.write(text)
            n += 1
    print('run_seeds.py: %d seeds in %s' % (n, out))
    return 0 if n else 1


if __name__ == '__main__':
    sys.exit(main())
