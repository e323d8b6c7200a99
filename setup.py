"""The latch._latch extension for `pip install .` and `pip wheel .` (the metadata is in
pyproject.toml). It links latch's static library, found in this order:

  LATCH_PREFIX=/opt/latch  pkg-config latch-static under that prefix (what `make install` wrote)
  build/liblatch.a         what `make` built in this tree (LATCH_BUILD names another build dir)
  pkg-config latch-static  an installed latch on PKG_CONFIG_PATH
  none of these            `make` builds build/liblatch.a first

Static linking keeps the wheel's one dependency on latch inside it; the system libraries
latch itself needs (oneDNN, OpenBLAS, ...) stay shared, as pkg-config lists them. setuptools
builds under build/setuptools, beside the Makefile's outputs."""
import glob
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(prefix):
    env = dict(os.environ)
    if prefix:
        env["PKG_CONFIG_PATH"] = os.path.join(prefix, "lib", "pkgconfig")
    try:
        run = subprocess.run(["pkg-config", "--cflags", "--libs", "latch-static"], capture_output=True, text=True,
                             env=env)
    except FileNotFoundError:
        return None
    return shlex.split(run.stdout) if run.returncode == 0 else None


def library_flags():
    """(compile flags, link flags) for the latch library, and what was picked (printed)."""
    prefix = os.environ.get("LATCH_PREFIX")
    if prefix:
        flags = pkg_config(prefix)
        if flags is None:
            sys.exit(f"setup.py: LATCH_PREFIX={prefix}: no {prefix}/lib/pkgconfig/latch-static.pc (make install PREFIX={prefix})")
        return split(flags), f"pkg-config latch-static under {prefix}"
    build = os.path.join(HERE, os.environ.get("LATCH_BUILD", "build"))
    archive = os.path.join(build, "liblatch.a")
    if not os.path.exists(archive):
        flags = pkg_config(None)
        if flags is not None:
            return split(flags), "pkg-config latch-static"
        jobs = str(os.cpu_count() or 1)
        print(f"setup.py: no {archive}: building it with make", flush=True)
        if subprocess.run(["make", "-C", HERE, f"-j{jobs}", f"BUILD={os.path.relpath(build, HERE)}",
                           os.path.relpath(archive, HERE)]).returncode != 0:
            sys.exit("setup.py: make could not build the latch library (./install-deps.sh installs what it needs)")
    libs = make_variable("LDLIBS")
    return ([f"-I{os.path.join(HERE, 'include')}"], [archive] + libs), archive


def make_variable(name):
    """A variable of the Makefile (the system libraries latch links), so they are listed once."""
    run = subprocess.run(["make", "-C", HERE, "-s", "--no-print-directory", f"print-{name}"], capture_output=True,
                         text=True)
    if run.returncode != 0:
        sys.exit(f"setup.py: make print-{name} failed: {run.stderr.strip()}")
    return shlex.split(run.stdout)


def split(flags):
    return [f for f in flags if f.startswith("-I")], [f for f in flags if not f.startswith("-I")]


os.makedirs(os.path.join(HERE, "build", "setuptools"), exist_ok=True)
(cflags, ldflags), picked = library_flags()
print(f"setup.py: linking latch from {picked}", flush=True)
extension = Extension(
    "latch._latch",
    sources=sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "python", "src", "*.c"))),
    # the archive too: a rebuilt library relinks the extension
    depends=sorted(glob.glob(os.path.join(HERE, "python", "src", "*.h"))) + [f for f in ldflags if f.endswith(".a")],
    include_dirs=[os.path.join(HERE, "python", "src")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE"] + cflags,
    extra_link_args=ldflags,
)
setup(ext_modules=[extension],
      options={"build": {"build_base": "build/setuptools"}, "egg_info": {"egg_base": "build/setuptools"}})
