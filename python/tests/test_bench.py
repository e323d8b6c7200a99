"""python3 -m latch.bench: the SVG picture of its table (bar heights worked by hand), one
small end-to-end run writing --json and --svg, and --tiny-only."""
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from latch.bench.svg import bars

SVG = "{http://www.w3.org/2000/svg}"


def test_bars_heights_are_log_ratios_to_eager():
    rows = [{"model": "m", "batch": 1, "size": 8, "ms": {"eager": 10.0, "latch_compile": 5.0, "latch_lazy": None}}]
    root = ET.fromstring(bars(rows, ["eager", "latch_lazy", "latch_compile"]))
    rects = [r for r in root.iter(SVG + "rect") if r.find(SVG + "title") is not None]
    titles = [r.find(SVG + "title").text for r in rects]
    assert titles == ["eager: 10.00 ms", "latch_compile: 5.00 ms"]  # no bar for a missing figure
    # 260 px for 0.1x..10x (two decades): 1x sits at y = 40 + 130 = 170; 0.5x is
    # log10(2) * 130 = 39.13 px below it, a bar from 170 down to 209.13
    eager, half = rects
    assert float(eager.get("height")) == 0.0
    assert float(half.get("y")) == 170.0
    assert abs(float(half.get("height")) - math.log10(2) * 130) < 0.06


def test_bench_writes_json_and_svg(tmp_path):
    out_json, out_svg = tmp_path / "b.json", tmp_path / "b.svg"
    cmd = [sys.executable, "-m", "latch.bench", "--models", "train_mlp", "--batch", "1", "--sizes", "small",
           "--modes", "eager,latch_compile", "--repeat", "2", "--json", str(out_json), "--svg", str(out_svg)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    result = json.loads(out_json.read_text())
    (row,) = result["rows"]
    assert row["model"] == "train_mlp" and row["batch"] == 1 and row["ms"]["eager"] > 0 and row["ms"]["latch_compile"] > 0
    titles = [t.text for t in ET.parse(out_svg).getroot().iter(SVG + "title")]
    assert [t.split(":")[0] for t in titles] == ["eager", "latch_compile"]


def test_tiny_only_times_each_trace_once_mode(tmp_path):
    out_json = tmp_path / "t.json"
    run = subprocess.run([sys.executable, "-m", "latch.bench", "--tiny-only", "--json", str(out_json)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    tiny = json.loads(out_json.read_text())["tiny"]
    assert sorted(tiny) == ["eager_us", "jit_us", "latch_compile_execute_us", "latch_compile_us"]
    assert all(v > 0 for v in tiny.values())
    assert "tiny function x + 1 per call: eager_us" in run.stdout
