#!/usr/bin/env bash
# Installs what latch needs to build and test on Debian 12. README's first command and
# .ci/run both call this, so the package list lives here only. Re-runs itself under sudo
# when not root.
set -euo pipefail

PACKAGES=(
  build-essential    # cc, make, ar; gcc's ASan/UBSan runtimes for `make sanitize`
  clang              # the fuzzer: -fsanitize=fuzzer is clang-only
  libclang-rt-14-dev # clang's libFuzzer and sanitizer runtimes (not pulled in by clang)
  libomp-14-dev      # make fuzz-blob: clang's OpenMP (omp.h, libomp) for runtime/parallel.c in the fuzzer's library build
  libxxhash-dev      # cache/: stable 128-bit hashes of canonical graphs
  libck-dev          # cache/: Concurrency Kit, lock-free reads of the in-memory table
  libhiredis-dev     # cache/: Redis's protocol (command writer, reply parser) for the remote tier
  nettle-dev         # cache/: HMAC-SHA256 signing of remote entries (LATCH_CACHE_SECRET)
  libgnutls28-dev    # cache/remote_tls.c: TLS to Redis (rediss://) over latch's own socket, certificates verified
  openssl            # tests/test_remote_tls.c: makes the test CA and certificates for redis-server --tls-port
  redis-server       # tests/test_remote_cache.c and test_cli_cache_remote.c start their own servers
  libgomp1           # runtime/: OpenMP's runtime, the one thread pool of oneDNN and latch's parallel loops
  libopenblas-dev    # runtime/: BLAS for dot and convolution
  libopenmpi-dev     # runtime/comm.c: Open MPI carries SPMD modules' collectives across processes and hosts
  openmpi-bin        # mpirun: starts the ranks of `latch run --spmd` and tests/test_spmd.c's runs
  libdnnl-dev        # runtime/: oneDNN, convolutions with blocked layouts, weight reorders and post-ops (ISA picked at run time)
  python3            # tests/test_compare_torch.sh runs bench/compare_torch.py (no torch needed)
  pkg-config         # tests/test_embed.sh links the README example through latch.pc and latch-static.pc
  python3-dev        # python/: Python.h for the latch._latch extension (make builds it)
  libdlpack-dev      # python/: dlpack.h, the struct torch._C._from_dlpack takes results in without a copy
  python3-pytest     # tests/test_python.sh: the Python package's tests
  python3-torch      # latch.torch: make_fx, __torch_dispatch__, the models, and the peers in latch.bench
  python3-torchvision # latch.models: resnet18/50, mobilenet_v2, squeezenet1_1, alexnet, vgg16, vit_b_16
  python3-networkx   # latch.torch's autograd path: AOTAutograd's min-cut partitioner (recomputes cheap ops in the backward instead of saving them) solves with it
  python3-pip        # pip install --no-build-isolation . (pyproject.toml); tests/test_pip_install.sh
  python3-setuptools # pyproject.toml's build backend (setup.py builds the extension)
  python3-wheel      # pip wheel and pip install . build a wheel with it
  python3-venv       # tests/test_pip_install.sh installs into a fresh venv (Debian's pip refuses system installs)
  python3-matplotlib # python3 -m latch.bench --png draws its table
)

# --list prints the packages, one per line (.ci/run installs them with apt-get itself).
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps.sh: run as root (no sudo here)" >&2
    exit 1
  fi
  exec sudo "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${PACKAGES[@]}"
