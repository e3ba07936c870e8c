#!/usr/bin/env bash
# The check on a real GPU: builds cotan with CUDA for sm_90, runs every CUDA kernel against the
# CPU backend on the same inputs, trains and decodes on the GPU against the CPU, runs the CUDA
# benchmarks and the CPU ones against the machine's PyTorch, and prints a short table last. Run
# from anywhere on a machine with an NVIDIA GPU and nvcc:
#
#   tests/gpu/run.sh            # logs and JSON into $OUT (or build-gpu/out)
#
# Needs meson and ninja (pip's are fine) and the Debian -dev packages cotan builds against
# (Eigen, oneTBB, doctest, Boost, toml++, ...). When they are not installed and .gpu-debs/ exists
# (tests/gpu/fetch-debs.sh), they are unpacked into /tmp/cotan-sysroot and found through
# PKG_CONFIG_PATH, CPATH and the library paths. Every step runs even when an earlier one failed,
# each under its own time limit; a step that would start after GPU_RUN_BUDGET seconds (default
# 540) is skipped and none runs past that budget plus 120 s, so the table always comes out; it is
# also kept up to date in $OUT/table.md after every step. GPU_ARCH (default 90) is the build's
# -Dgpu_arch.
# The host's CPU is measured against the machine's PyTorch by bench/cpu-report.sh on its first
# cores, GPU_CPU_ROUNDS rounds (default 1); GPU_RUN_ONLY=cpu skips the GPU steps and the test
# suites, for a run that spends its time on that report.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
OUT=${OUT:-build-gpu/out}
mkdir -p "$OUT"
BUILD=${GPU_BUILD_DIR:-build-gpu}  # another build directory, for a rerun of the steps
BUDGET=${GPU_RUN_BUDGET:-540}
HARD=$((BUDGET + 120))
ONLY=${GPU_RUN_ONLY:-all}
[[ $ONLY == all || $ONLY == cpu ]] || { echo "GPU_RUN_ONLY is all or cpu, not '$ONLY'" >&2; exit 2; }
ROUNDS=${GPU_CPU_ROUNDS:-1}
export PATH="/usr/local/cuda/bin:$PATH"
declare -a rows=()
table() {
  printf '| %-34s | %-8s | %s |\n' check result "time, log in $OUT"
  printf '|%s|%s|%s|\n' "------------------------------------" "----------" "----------------------"
  printf '%s\n' "${rows[@]}"
}
row() { rows+=("$(printf '| %-34s | %-8s | %s |' "$1" "$2" "$3")"); table >"$OUT/table.md"; }
step() {  # step NAME LOG LIMIT COMMAND...: runs COMMAND for at most LIMIT seconds, logs to $OUT/LOG
  local name=$1 log=$2 limit=$3; shift 3
  if (( SECONDS >= BUDGET )); then row "$name" "SKIP" "the run's ${BUDGET} s were spent"; return 1; fi
  local start=$SECONDS
  (( limit > HARD - SECONDS )) && limit=$((HARD - SECONDS))
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$log" 2>&1
  local rc=$?
  local result=PASS
  if (( rc == 124 || rc == 137 )); then result="TIMEOUT"; elif (( rc != 0 )); then result="FAIL $rc"; fi
  row "$name" "$result" "$((SECONDS - start)) s, $log"
  return $rc
}
# A step that needs the GPU (or, below, the test suites): skipped with GPU_RUN_ONLY=cpu.
gpu_step() {
  if [[ $ONLY == cpu ]]; then row "$1" "SKIP" "GPU_RUN_ONLY=cpu"; return 0; fi
  step "$@"
}
{
  echo "date: $(date -u)"
  grep -h PRETTY_NAME /etc/os-release 2>/dev/null
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
  echo "c++: $(c++ --version 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
  echo "meson: $(meson --version 2>&1), ninja: $(ninja --version 2>&1), pkg-config: $(command -v pkg-config || echo none)"
  # What the CPU GEMM's blocking is derived from, and the vector extensions it may use.
  lscpu 2>/dev/null | grep -E "^(Model name|Thread|Core|Socket|NUMA node\(s\)|L1d|L2|L3)"
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    echo "cpu0 $(basename "$d"): L$(cat "$d/level") $(cat "$d/type") $(cat "$d/size") shared with $(cat "$d/shared_cpu_list")"
  done 2>/dev/null
  echo "flags: $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512bw|avx512vl|avx512_bf16|avx512_fp16|amx_tile|amx_bf16' /proc/cpuinfo | tr '\n' ' ')"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

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
  export PATH="$PATH:$root/usr/bin"  # pkgconf, when the machine has no pkg-config of its own
  # The unpacked .pc files name /usr; PKG_CONFIG_SYSROOT_DIR prefixes them with $root. Links
  # such as libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13 name the machine's own root: point
  # them into the sysroot.
  find "$root" -type l | while read -r link; do
    target=$(readlink "$link")
    [[ $target == /* && ! -e $target && -e $root$target ]] && ln -sfn "$root$target" "$link"
  done
fi
# The default corpus is Debian's fortunes; elsewhere, the unpacked copy.
data=()
if [[ ! -d /usr/share/games/fortunes && -d /tmp/cotan-sysroot/usr/share/games/fortunes ]]; then
  data=(--data /tmp/cotan-sysroot/usr/share/games/fortunes)
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
  gpu=$(head -1 "$OUT/gpu.txt")
else
  gpu="none found (no nvidia-smi)"
fi

# ---- build cotan for this GPU; the test programs are built last, with the CPU suites ----
if [[ ! -f $BUILD/build.ninja ]]; then
  mkdir -p "$BUILD"
  printf "[binaries]\ncuda = '%s'\n" "$PWD/cuda/nvcc-depfile" > "$BUILD/nvcc-depfile.ini"  # as build.sh
  step "configure (-Dcuda=enabled)" configure.log 120 meson setup "$BUILD" -Dcuda=enabled \
    --buildtype=release -Dgpu_arch="${GPU_ARCH:-90}" --native-file "$BUILD/nvcc-depfile.ini"
fi
step "build cotan" build.log 360 ninja -C "$BUILD" cotan
cotan="$BUILD/cotan"

# ---- CUDA kernels against the CPU backend ----
step "cotan info" info.log 30 "$cotan" info
# Whether this machine's compiler kept the CPU GEMM micro-kernels' accumulators in registers.
step "cpu: GEMM accumulators in registers" gemm_registers.log 60 sh tests/tensor/gemm_registers.sh "$BUILD/libcotan.a"
gpu_step "gradcheck --device cuda" gradcheck_cuda.log 120 "$cotan" gradcheck --device cuda

# ---- training on the GPU: the quick study, and its teacher's losses against the CPU's ----
gpu_step "distill --quick --device cuda" distill_cuda.log 180 "$cotan" distill --quick --device cuda \
  "${data[@]}" --run-dir "$OUT/distill-cuda" --cache-dir "$OUT/cache-cuda"
gpu_step "pretrain 20 steps, cuda vs cpu" pretrain_compare.log 120 bash -c '
  set -e
  "$0" pretrain --steps 20 --eval-every 0 "${@:2}" --run-dir "$1/pre-cpu" >/dev/null
  "$0" pretrain --steps 20 --eval-every 0 "${@:2}" --device cuda --run-dir "$1/pre-cuda" >/dev/null
  paste <(sed "s/.*\"loss\":\([^,]*\),.*/\1/" "$1/pre-cpu/metrics.jsonl") \
        <(sed "s/.*\"loss\":\([^,]*\),.*/\1/" "$1/pre-cuda/metrics.jsonl") |
    awk "{ d = \$1 - \$2; if (d < 0) d = -d; print; if (d > 1e-3 * \$1) bad++ } END { exit bad > 0 }"' \
  "$cotan" "$OUT" "${data[@]}"

# ---- decoding on the GPU: the cached attention kernel, greedy text equal to the CPU's ----
gpu_step "generate greedy, cuda vs cpu" generate_compare.log 120 bash -c '
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
  gpu_step "bench $b --device cuda" "bench_$b.json" 120 "$cotan" bench "$b" --device cuda --json
done
gpu_step "bench matmul --device cuda --tf32" bench_matmul_tf32.json 120 "$cotan" bench matmul --device cuda --tf32 \
  --dtypes f32 --json
# Greedy decoding with the KV cache (cuBLAS and the cached attention kernel), qwen1.5-0.5b's shape
# with random weights, one row and eight.
for rows in 1 8; do
  gpu_step "bench generate --device cuda --batch $rows" "bench_generate_b$rows.json" 180 "$cotan" bench generate \
    --device cuda --batch "$rows" --json
done
# The tensor-core attention kernels (bf16, d = 64 and 128) against the composed attention on the
# GPU: output and gradients within 2e-2 relative (bf16).
for d in 64 128; do
  gpu_step "attention bf16 d=$d: mma vs composed" "attention_bf16_d$d.log" 120 bash -c '
    set -e
    "$0" bench attention --device cuda --dtype bf16 --dim "$1" --repeat 3 --json > "$2"
    python3 -c "import json, sys; r = json.load(open(sys.argv[1])); d = r[\"max_relative_difference\"]; print(d); sys.exit(0 if d and max(d.values()) < 2e-2 else 1)" "$2"' \
    "$cotan" "$d" "$OUT/bench_attention_bf16_d$d.json"
done

# ---- the host's CPU against the machine's PyTorch, on its first cores (when its python3 has torch) ----
# bench/cpu-report.sh: the f32 GEMM at squares and at a training step's products, the KD step
# against eager PyTorch and torch.compile, attention against SDPA, on 2 and 1 threads pinned to
# CPUs 0-1 and 0 (torch.compile's first step can take minutes); its table is printed last. A
# round took 4 minutes on a 2-core Zen 3.
py=$(command -v python3)
if [[ -n $py ]] && "$py" -c "import torch" 2>/dev/null; then
  step "cpu: bench/cpu-report.sh, $ROUNDS round(s)" cpu_report.log $((420 * ROUNDS)) bench/cpu-report.sh --pin \
    --rounds "$ROUNDS" --threads "2 1" --cotan "$cotan" --torch-python "$py" --out "$OUT/cpu-report"
else
  row "cpu: bench/cpu-report.sh" "SKIP" "no python3 that imports torch"
fi

# ---- the test programs and the CPU and emulator suites, as CI runs them ----
gpu_step "build tests" build_tests.log 300 ninja -C "$BUILD"
gpu_step "emulator + CPU suites (meson test)" meson_test.log 240 meson test -C "$BUILD" --no-rebuild \
  --num-processes "$(nproc)"

# ---- the table, last ----
echo
echo "GPU: ${gpu:-unknown}"
table
for f in "$OUT"/bench_*.json; do
  [[ -s $f ]] && { printf '\n%s: ' "$(basename "$f")"; head -c 600 "$f"; echo; }
done
if [[ -s $OUT/cpu-report/table.md ]]; then
  printf "\nthe host's CPU (bench/cpu-report.sh):\n"
  cat "$OUT/cpu-report/table.md"
fi
