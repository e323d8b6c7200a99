#!/bin/sh
# The tree speaks of the product as it is now, and its documents point at what exists.
#
# 1. No words of the development process in any tracked file (documents, code, comments,
#    tests, output strings, the Makefile, scripts): the word for a tracked task or for a
#    work period followed by its number (one or several), dates of work (a year-month-day
#    date), figures of the machine's run-queue length, and commit hashes (a 7-40 digit hex word, with letters and digits, that
#    git resolves to a commit of this repository; hex constants and hash values that are no
#    commit are left alone).
# 2. README.md and docs/*.md: every relative link names a file that exists (and a heading
#    of it, after '#'); every repository path in backticks (a word starting with one of the
#    tree's folders, globs allowed) exists; a bare C file name in backticks (foo.c) names a
#    file of the tree, and a bare header (bar.h) one of the tree or of the system's.
#
# Each failure is printed as FILE:LINE: rule: the text. The corpus under ../shared is not
# part of the tree. Needs python3 (install-deps.sh has it).
cd "$(dirname "$0")/.." || exit 1
exec python3 - "$@" <<'PY'
import fnmatch, glob, os, re, subprocess, sys

SELF = "tests/test_docs.sh"
failures = []
checked = 0

def fail(path, line, rule, text):
    failures.append("%s:%d: %s: %s" % (path, line, rule, text.strip()[:160]))

def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
        if names:
            return [n for n in names if os.path.isfile(n)], True
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = re.compile(r"^\./(build[^/]*|\.git)(/|$)")
    names = []
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if not skip.match(os.path.join(root, d) + "/")]
        names += [os.path.join(root, f)[2:] for f in files]
    return names, False

files, in_git = tracked_files()

# ---- 1. words of the development process ----
RULES = [
    ("numbered issue", re.compile(r"\bissues?\s+#?\d", re.I)),
    ("numbered stop", re.compile(r"\bstops?\s+\d+\b", re.I)),
    ("date of work", re.compile(r"(?<![\w.-])20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(?![\w-])")),
    ("machine load", re.compile(r"\bload[ ]averages?\b|\bat (a )?load (of )?\d", re.I)),
]
# "issue" or "stop" ending a line whose next line, past a comment marker, starts with a number
SPLIT = re.compile(r"\b(issues?|stops?)\s*$", re.I)
NEXT = re.compile(r"^\s*(\*|#|//|--)?\s*#?\d")
HEX = re.compile(r"(?<![\w.$#/-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
hex_words = {}  # word -> [(path, line, text)]
for path in files:
    if path == SELF:
        continue
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        continue
    if b"\0" in data[:8192]:
        continue  # binary
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        for rule, pattern in RULES:
            if pattern.search(line):
                fail(path, number, rule, line)
        if SPLIT.search(line) and number < len(lines) and NEXT.match(lines[number]):
            fail(path, number, "numbered issue or stop across lines", line + " " + lines[number].strip())
        for m in HEX.finditer(line):
            if line[max(0, m.start() - 2):m.start()].lower() == "0x":
                continue
            hex_words.setdefault(m.group(0), []).append((path, number, line))
    checked += 1
if in_git and hex_words:
    words = sorted(hex_words)
    query = "".join(w + "^{commit}\n" for w in words)
    out = subprocess.run(["git", "cat-file", "--batch-check"], input=query.encode(),
                         capture_output=True).stdout.decode().split("\n")
    for word, answer in zip(words, out):
        if answer.endswith(" commit") or " commit " in answer:
            for path, number, line in hex_words[word]:
                fail(path, number, "commit hash " + word, line)

# ---- 2. links and paths in the documents ----
tree = set(files)
tree_dirs = set()
for n in files:
    parts = n.split("/")
    for i in range(1, len(parts)):
        tree_dirs.add("/".join(parts[:i]))
TOP = sorted({n.split("/")[0] for n in files if "/" in n})
basenames = {os.path.basename(n) for n in files}

def exists(rel):
    rel = rel.rstrip("/")
    if any(c in rel for c in "*?["):
        return any(fnmatch.fnmatch(n, rel) for n in files) or any(fnmatch.fnmatch(d, rel) for d in tree_dirs)
    return rel in tree or rel in tree_dirs or os.path.exists(rel)

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(path):
    found = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                found.add(slug(line.lstrip("#")))
    return found

def system_header(name):
    for root in ("/usr/include", "/usr/local/include"):
        for dirpath, _, names in os.walk(root):
            if name in names:
                return True
    return False

docs = [n for n in files if n == "README.md" or (n.startswith("docs/") and n.endswith(".md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
TICK = re.compile(r"`([^`\n]+)`")
PATHWORD = re.compile(r"^(?:%s)/[\w.*?\[\]/-]*$" % "|".join(re.escape(t) for t in TOP)) if TOP else None
BARE = re.compile(r"^[A-Za-z][\w*-]*\.(c|h)$")
for doc in docs:
    here = os.path.dirname(doc)
    in_code = False
    with open(doc, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            file = os.path.normpath(os.path.join(here, name)) if name else doc
            checked += 1
            if name and not exists(file):
                fail(doc, number, "link to a missing file", target)
            elif anchor and file.endswith(".md") and anchor not in anchors(file):
                fail(doc, number, "link to a missing heading", target)
        for m in TICK.finditer(line):
            for word in m.group(1).split():
                word = word.rstrip(".,;:)").split(":")[0]
                if PATHWORD and PATHWORD.match(word):
                    checked += 1
                    if not exists(word):
                        fail(doc, number, "path that does not exist", word)
                elif BARE.match(word):
                    checked += 1
                    ok = any(fnmatch.fnmatch(b, word) for b in basenames)
                    if not ok and word.endswith(".h"):
                        ok = system_header(word)
                    if not ok:
                        fail(doc, number, "file that does not exist", word)

for line in failures:
    print(line)
print("tests/test_docs.sh: %d passed, %d failed" % (max(checked - len(failures), 0), len(failures)))
sys.exit(1 if failures else 0)
PY
