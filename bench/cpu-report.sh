#!/usr/bin/env bash
# cotan's CPU against PyTorch in one go, as the README's "Benchmarks against PyTorch" describes
# each bench: for each thread count and round, the f32 GEMM at squares (bench matmul --torch) and
# at a training step's own products (bench matmul --step --torch), the KD training step against
# eager PyTorch and torch.compile (bench train) and the fused attention against
# scaled_dot_product_attention (bench attention --torch); in a build with the AVX512_BF16 kernel,
# also the bf16 GEMM (--bf16-sizes, nn and nt) widened to f32 (the default) and on vdpbf16ps
# (COTAN_GEMM_BF16=avx512_bf16), both beside PyTorch's bf16 matmul. Every bench's JSON is kept in OUT as
# BENCH-tTHREADS-rROUND.json, and the table of medians over the rounds (bench/cpu_report.py)
# ends the output and is written to OUT/table.md. Rounds run one after the other, each bench
# taking turns with PyTorch inside its own run, so a change in the machine's load shows as a
# spread across rounds, not as a skewed ratio.
#
#   bench/cpu-report.sh [--rounds 3] [--threads "2 1"] [--out DIR] [--cotan PATH] [--pin]
#                       [--sizes 512,1024,2048,4096] [--train-steps 10] [--no-torch]
#                       [--attention-args "..."] [--torch-python PATH] [--bf16-sizes 1024,2048]
#
# --pin runs a bench of N threads on CPUs 0..N-1 (taskset), for a machine with more cores than
# the bench uses. --no-torch times cotan alone. PyTorch comes from where the benches look for it
# (README; bench/setup-reference.sh makes it). A run of the defaults takes about 12 minutes on
# 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
rounds=3
thread_counts="2 1"
out=""
cotan="$root/build/cotan"
pin=0
sizes="512,1024,2048,4096"
bf16_sizes="1024,2048"
train_steps=10
torch=(--torch)
attention_args=()
torch_python=()
say() { printf '[cpu-report] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --threads) thread_counts=${2:?--threads needs thread counts}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --cotan) cotan=${2:?--cotan needs a path}; shift 2 ;;
    --pin) pin=1; shift ;;
    --sizes) sizes=${2:?--sizes needs sizes}; shift 2 ;;
    --bf16-sizes) bf16_sizes=${2:?--bf16-sizes needs sizes}; shift 2 ;;
    --train-steps) train_steps=${2:?--train-steps needs a number}; shift 2 ;;
    --no-torch) torch=(); shift ;;
    --attention-args) read -r -a attention_args <<<"${2?--attention-args needs arguments}"; shift 2 ;;
    --torch-python) torch_python=(--torch-python "${2:?--torch-python needs a path}"); shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive number, got '$rounds'"
[[ $train_steps =~ ^[1-9][0-9]*$ ]] || die "--train-steps must be a positive number, got '$train_steps'"
for t in $thread_counts; do
  [[ $t =~ ^[1-9][0-9]*$ ]] || die "--threads takes positive thread counts, got '$t'"
done
[[ -x $cotan ]] || die "no cotan at $cotan (build it with ./build.sh, or pass --cotan PATH)"
command -v python3 >/dev/null || die "python3 is needed for the table"
if ((pin)); then command -v taskset >/dev/null || die "--pin needs taskset (util-linux)"; fi
out=${out:-$root/build/cpu-report-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
bf16_dot=0  # whether this build has the vdpbf16ps kernel (cotan info's cpu_gemm.bf16_kernels)
case $("$cotan" info --json) in *'"bf16_kernels":"f32,avx512_bf16"'*) bf16_dot=1 ;; esac

{
  echo "date: $(date -u)"
  lscpu 2>/dev/null | grep -E "^(Model name|Thread|Core|Socket|L1d|L2|L3)" || true
  echo "flags: $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512_bf16|amx_tile' /proc/cpuinfo | tr '\n' ' ')"
  "$cotan" info
} >"$out/machine.txt" 2>&1

run() {  # NAME THREADS ROUND ARGS...: one bench, its JSON into OUT
  local name=$1 threads=$2 round=$3; shift 3
  local prefix=()
  ((pin)) && prefix=(taskset -c "0-$((threads - 1))")
  local file="$out/$name-t$threads-r$round.json"
  say "round $round of $rounds, $threads thread(s): $name"
  if ! "${prefix[@]}" "$cotan" "$@" --threads "$threads" --json >"$file.part" 2>"$out/$name-t$threads-r$round.log"; then
    say "error: $name failed; its output is in $out/$name-t$threads-r$round.log"
    tail -3 "$out/$name-t$threads-r$round.log" >&2
    exit 1
  fi
  mv "$file.part" "$file"
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  for threads in $thread_counts; do
    run squares "$threads" "$round" bench matmul "${torch[@]}" "${torch_python[@]}" --sizes "$sizes" --layouts nn \
      --dtypes f32 --repeat 5
    run step "$threads" "$round" bench matmul --step "${torch[@]}" "${torch_python[@]}" --repeat 5
    if ((${#torch[@]})); then
      run train "$threads" "$round" bench train --torch "${torch_python[@]}" --steps "$train_steps"
    else
      run train "$threads" "$round" bench train --no-torch --steps "$train_steps"
    fi
    run attention "$threads" "$round" bench attention "${torch[@]}" "${torch_python[@]}" --repeat 3 \
      "${attention_args[@]}"
    if ((bf16_dot)); then
      bf16=(bench matmul "${torch[@]}" "${torch_python[@]}" --sizes "$bf16_sizes" --layouts nn,nt --dtypes bf16 --repeat 5)
      run bf16 "$threads" "$round" "${bf16[@]}"
      COTAN_GEMM_BF16=avx512_bf16 run bf16dot "$threads" "$round" "${bf16[@]}"
    fi
  done
done
say "done in $((SECONDS - start)) s; JSON and logs in $out"
python3 "$root/bench/cpu_report.py" "$out" | tee "$out/table.md"
