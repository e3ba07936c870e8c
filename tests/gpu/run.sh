#!/usr/bin/env bash
# The check on a real GPU: builds cotan with CUDA for sm_90 and sm_80, runs every CUDA kernel
# against the CPU backend on the same inputs, runs the CUDA benchmarks, and prints a short table
# last. Run from anywhere on a machine with an NVIDIA GPU and nvcc:
#
#   tests/gpu/run.sh            # logs and JSON into $OUT (or build-gpu/out)
#
# Needs meson and ninja (pip's are fine) and the Debian -dev packages cotan builds against
# (Eigen, oneTBB, doctest, Boost.Program_options, Boost.Context). When they are not installed
# and .gpu-debs/ exists (tests/gpu/fetch-debs.sh), they are unpacked into /tmp/cotan-sysroot and
# found through PKG_CONFIG_PATH, CPATH and the library paths. Every step runs even when an
# earlier one failed; the table says which passed.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
OUT=${OUT:-build-gpu/out}
mkdir -p "$OUT"
BUILD=build-gpu
export PATH="/usr/local/cuda/bin:$PATH"
declare -a rows=()
row() { rows+=("$(printf '| %-34s | %-8s | %s |' "$1" "$2" "$3")"); }
step() {  # step NAME LOG COMMAND...: runs COMMAND, logs to $OUT/LOG, records PASS/FAIL and seconds
  local name=$1 log=$2; shift 2
  local start=$SECONDS
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  row "$name" "$([[ $rc == 0 ]] && echo PASS || echo "FAIL $rc")" "$((SECONDS - start)) s, $log"
  return $rc
}

# ---- packages ----
if ! pkg-config --exists eigen3 tbb 2>/dev/null && [[ -d .gpu-debs ]]; then
  root=/tmp/cotan-sysroot
  mkdir -p "$root"
  for f in .gpu-debs/*.deb; do dpkg -x "$f" "$root"; done
  lib="$root/usr/lib/x86_64-linux-gnu"
  export PKG_CONFIG_PATH="$lib/pkgconfig:$root/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
  export PKG_CONFIG_SYSROOT_DIR="$root"
  export CPATH="$root/usr/include:${CPATH:-}" LIBRARY_PATH="$lib:${LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  export BOOST_INCLUDEDIR="$root/usr/include" BOOST_LIBRARYDIR="$lib"
  # The unpacked .pc files name /usr; PKG_CONFIG_SYSROOT_DIR prefixes them with $root.
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
gpu=$(head -1 "$OUT/gpu.txt")

# ---- build for sm_90 and sm_80 (cuda/meson.build names both) ----
if [[ ! -f $BUILD/build.ninja ]]; then
  mkdir -p "$BUILD"
  printf "[binaries]\ncuda = '%s'\n" "$PWD/cuda/nvcc-depfile" > "$BUILD/nvcc-depfile.ini"  # as build.sh
  step "configure (-Dcuda=enabled)" configure.log meson setup "$BUILD" -Dcuda=enabled --buildtype=release \
    --native-file "$BUILD/nvcc-depfile.ini"
fi
step "build" build.log ninja -C "$BUILD"
cotan="$BUILD/cotan"

# ---- CUDA kernels against the CPU backend ----
step "cotan info" info.log "$cotan" info
step "gradcheck --device cuda" gradcheck_cuda.log "$cotan" gradcheck --device cuda
step "emulator + CPU suites (meson test)" meson_test.log meson test -C "$BUILD" --num-processes 8

# ---- training on the GPU: the quick study, and its teacher's losses against the CPU's ----
step "distill --quick --device cuda" distill_cuda.log "$cotan" distill --quick --device cuda \
  --run-dir "$OUT/distill-cuda" --cache-dir "$OUT/cache-cuda"
step "pretrain 20 steps, cuda vs cpu" pretrain_compare.log bash -c '
  set -e
  "$0" pretrain --steps 20 --eval-every 0 --run-dir "$1/pre-cpu" >/dev/null
  "$0" pretrain --steps 20 --eval-every 0 --device cuda --run-dir "$1/pre-cuda" >/dev/null
  paste <(sed "s/.*\"loss\":\([^,]*\),.*/\1/" "$1/pre-cpu/metrics.jsonl") \
        <(sed "s/.*\"loss\":\([^,]*\),.*/\1/" "$1/pre-cuda/metrics.jsonl") |
    awk "{ d = \$1 - \$2; if (d < 0) d = -d; print; if (d > 1e-3 * \$1) bad++ } END { exit bad > 0 }"' \
  "$cotan" "$OUT"

# ---- decoding on the GPU: the cached attention kernel, greedy text equal to the CPU's ----
step "generate greedy, cuda vs cpu" generate_compare.log bash -c '
  set -e
  n=0
  for m in $(find "$1/distill-cuda" -type d -name model | sort); do
    "$0" generate --model "$m" --prompt "The " --greedy --max-new-tokens 32 > "$1/gen-cpu.txt"
    "$0" generate --model "$m" --prompt "The " --greedy --max-new-tokens 32 --device cuda > "$1/gen-cuda.txt"
    echo "$m"; cat "$1/gen-cuda.txt"
    cmp "$1/gen-cpu.txt" "$1/gen-cuda.txt"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ]' "$cotan" "$OUT"

# ---- benchmarks ----
for b in matmul attention kd-loss train; do
  step "bench $b --device cuda" "bench_$b.json" "$cotan" bench "$b" --device cuda --json
done
step "bench matmul --device cuda --tf32" bench_matmul_tf32.json "$cotan" bench matmul --device cuda --tf32 \
  --dtypes f32 --json
# The tensor-core attention kernels (bf16, d = 64 and 128) against the composed attention on the
# GPU: output and gradients within 2e-2 relative (bf16).
for d in 64 128; do
  step "attention bf16 d=$d: mma vs composed" "attention_bf16_d$d.log" bash -c '
    set -e
    "$0" bench attention --device cuda --dtype bf16 --dim "$1" --repeat 3 --json > "$2"
    python3 -c "import json, sys; r = json.load(open(sys.argv[1])); d = r[\"max_relative_difference\"]; print(d); sys.exit(0 if d and max(d.values()) < 2e-2 else 1)" "$2"' \
    "$cotan" "$d" "$OUT/bench_attention_bf16_d$d.json"
done

# ---- the table, last ----
echo
echo "GPU: ${gpu:-unknown}"
printf '| %-34s | %-8s | %s |\n' check result "time, log in $OUT"
printf '|%s|%s|%s|\n' "------------------------------------" "----------" "----------------------"
printf '%s\n' "${rows[@]}"
for f in "$OUT"/bench_*.json; do
  [[ -s $f ]] && { printf '\n%s: ' "$(basename "$f")"; head -c 600 "$f"; echo; }
done
