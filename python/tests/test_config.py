"""latch.config and latch.configure: settings reach the runtime (the disk cache written where
cache_dir says; cache="off" keeps one graph), the runtime's settings refused once it is open,
unknown names and bad values refused with their names. Each case in a fresh process: the
runtime opens once per process."""
import os
import subprocess
import sys
import textwrap

import pytest


def run(code):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LATCH_")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_disk_cache_in_the_configured_dir(tmp_path):
    out = run(f"""
        import os, torch, latch, latch.torch as lt
        latch.configure(cache="disk", cache_dir={str(tmp_path)!r}, threads=1)
        assert latch.config.cache == "disk" and latch.config.threads == "1"
        assert os.environ["LATCH_CACHE_DIR"] == {str(tmp_path)!r}
        assert lt.compile(lambda x: x * 3 + 2)(torch.ones(4)).tolist() == [5.0] * 4
        print("disk_writes", latch.stats()["disk_writes"])
    """)
    assert int(out.split()[-1]) >= 1
    assert any(files for _, _, files in os.walk(tmp_path))


def test_cache_off_keeps_one_graph():
    out = run("""
        import torch, latch, latch.torch as lt
        latch.config.cache = "off"
        lt.compile(lambda x: x + 1)(torch.ones(3))
        lt.compile(lambda x: x * 7)(torch.ones(5))
        print(latch.stats()["cache_entries"])
    """)
    assert out.split() == ["1"]


def test_open_once_settings_refused_after_open():
    out = run("""
        import latch
        latch.stats()  # opens the runtime
        try:
            latch.config.cache = "disk"
        except RuntimeError as e:
            print("refused:", e)
        latch.config.recompile_limit = 3  # read when a function is made: still allowed
        print("limit", latch.config.recompile_limit)
    """)
    assert "refused: latch.config.cache: the runtime is already open" in out
    assert "limit 3" in out


@pytest.mark.parametrize("stmt,error", [
    ("latch.config.cahce = 'disk'", "no setting 'cahce'; settings: backend, threads"),
    ("latch.config.cache = 'ram'", "'ram' is not one of disk, memory, off"),
    ("latch.config.threads = -2", "threads: expected a non-negative int"),
    ("latch.config.log = 'compile'", "unknown word 'compile'"),
    ("latch.configure(threads=2, chek='accuracy')", "unknown setting 'chek'"),
])
def test_bad_names_and_values(stmt, error):
    out = run(f"""
        import latch
        try:
            {stmt}
        except (AttributeError, ValueError, TypeError) as e:
            print(type(e).__name__, e)
        print("threads", latch.config.threads)
    """)
    assert error in out and "threads None" in out  # configure sets nothing when one name is bad
