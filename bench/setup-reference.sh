#!/usr/bin/env bash
# Makes the PyTorch reference environment of `cotan bench matmul|attention|train|generate --torch`:
# a virtual environment with PyTorch 2.x, numpy and HF transformers from PyPI (its CPU kernels: MKL
# for GEMM, oneDNN, the fused scaled_dot_product_attention, torch.compile through inductor; and
# transformers' generate, which `bench generate` times). Debian's
# python3-torch 1.13 is no fair reference: its OpenBLAS falls back to SSE3 kernels on newer CPUs
# (BENCHMARKS.md). Run by hand, never in CI; running it again does nothing once the environment
# imports torch 2.x.
#
#   bench/setup-reference.sh [DIR]
#
# DIR defaults to $COTAN_TORCH_ENV, else ${XDG_CACHE_HOME:-~/.cache}/cotan/torchenv, where the
# benches look for DIR/bin/python (app/torch_reference.hpp). PYTHON (default python3) is the
# interpreter that makes it; TORCH_INDEX_URL, when set, is the index torch comes from (for
# example https://download.pytorch.org/whl/cpu for a wheel without the CUDA libraries; the
# default PyPI wheel pulls them in, which costs disk, not speed: the CPU kernels are the same).
# torch.compile also needs a C++ compiler (g++) at run time.
set -euo pipefail

dir=${1:-${COTAN_TORCH_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cotan/torchenv}}
python=${PYTHON:-python3}
say() { printf '[setup-reference] %s\n' "$*"; }

# Already there: torch 2.x, numpy and transformers import.
if [[ -x "$dir/bin/python" ]] &&
   "$dir/bin/python" -c 'import sys, numpy, torch, transformers; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
     2>/dev/null; then
  say "$dir has $("$dir/bin/python" -c 'import torch; print("torch", torch.__version__)'); nothing to do"
  exit 0
fi

command -v "$python" >/dev/null || { say "error: $python not found (set PYTHON)" >&2; exit 1; }
"$python" -c 'import venv, ensurepip' 2>/dev/null ||
  { say "error: $python cannot make a virtual environment (apt-get install python3-venv)" >&2; exit 1; }

say "making $dir"
mkdir -p "$(dirname "$dir")"
[[ -x "$dir/bin/python" ]] || "$python" -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --upgrade pip
index=()
[[ -n "${TORCH_INDEX_URL:-}" ]] && index=(--index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple)
"$dir/bin/python" -m pip install --quiet "${index[@]}" 'torch>=2' numpy
"$dir/bin/python" -m pip install --quiet transformers

# What the benches will report: the version, MKL and oneDNN.
"$dir/bin/python" - <<'PY'
import re, torch, transformers
show = torch.__config__.show()
mkl = re.search(r"Math Kernel Library Version ([\w.]+)", show)
dnn = re.search(r"(?:MKL-DNN|oneDNN) v?([\d.]+)", show)
print(f"[setup-reference] torch {torch.__version__}, MKL {mkl.group(1) if mkl else 'absent'}, "
      f"oneDNN {dnn.group(1) if dnn else 'absent'}, {torch.get_num_threads()} threads by default, "
      f"transformers {transformers.__version__}")
PY
say "done: the benches find $dir/bin/python (or pass --torch-python $dir/bin/python)"
