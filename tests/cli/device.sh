# --device: the clear error without a GPU, and the CUDA code paths of the trainer, the study and
# gradcheck run end to end through the SIMT emulator (COTAN_CUDA_EMULATOR=1 serves cuda:0 on the
# CPU). Usage: sh device.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# Cases that expect no GPU exit 77 (meson: skipped) on a machine that has one.
require_no_gpu() {
  if COTAN_CUDA_EMULATOR= "$COTAN" info 2>/dev/null | grep -q '^    cuda:'; then
    echo "SKIP $CASE: this machine has a CUDA device"
    exit 77
  fi
}

# ---- no GPU: one line, nothing written ----

case_no_device_pretrain() {
  require_no_gpu
  COTAN_CUDA_EMULATOR= expect_error "cuda" pretrain --device cuda --run-dir "$WORK/run"
  grep -qE "no CUDA device|no CUDA backend" "$STDERR" || fail "the error does not say why: $(cat "$STDERR")"
  [ ! -e "$WORK/run" ] || fail "the run directory was created"
}

case_no_device_distill() {
  require_no_gpu
  COTAN_CUDA_EMULATOR= expect_error "cuda" distill --device cuda --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"
  [ ! -e "$WORK/cache" ] || fail "the cache directory was created"
}

case_no_device_gradcheck() {
  require_no_gpu
  COTAN_CUDA_EMULATOR= expect_error "cuda" "$COTAN" gradcheck --device cuda --filter exp
}

case_no_device_bench() {
  require_no_gpu
  COTAN_CUDA_EMULATOR= expect_error "cuda" "$COTAN" bench matmul --device cuda --sizes 64 --repeat 1
}

case_unknown_device() {
  expect_error "--device tpu|unknown device" pretrain --device tpu --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "the run directory was created"
}

# ---- the CUDA paths through the emulator ----

# Three pretraining steps on cuda:0 (the emulator) follow the CPU's losses (other reduction orders:
# rounding differences only), and a run stopped on the device resumes bit for bit.
case_emulated_pretrain() {
  pretrain --run-dir "$WORK/cpu" > /dev/null 2> "$STDERR" || fail "the CPU run failed: $(cat "$STDERR")"
  COTAN_CUDA_EMULATOR=1 pretrain --device cuda --run-dir "$WORK/cuda" > /dev/null 2> "$STDERR" ||
    fail "the emulated CUDA run failed: $(cat "$STDERR")"
  losses "$WORK/cpu/metrics.jsonl" > "$ROOT/cpu.txt"
  losses "$WORK/cuda/metrics.jsonl" > "$ROOT/cuda.txt"
  expect_close "$ROOT/cuda.txt" "$ROOT/cpu.txt" 1e-4 "CPU and emulated CUDA losses"
  grep -q '"device": "cuda:0"' "$WORK/cuda/checkpoint/trainer.json" || fail "the checkpoint does not record cuda:0"
  COTAN_CUDA_EMULATOR=1 pretrain --device cuda --stop-after 2 --run-dir "$WORK/split" > /dev/null 2>&1 ||
    fail "the first half failed"
  COTAN_CUDA_EMULATOR=1 pretrain --device cuda --resume "$WORK/split" > /dev/null 2> "$STDERR" ||
    fail "the resumed half failed: $(cat "$STDERR")"
  deterministic_metrics "$WORK/split/metrics.jsonl" > "$ROOT/split.txt"
  deterministic_metrics "$WORK/cuda/metrics.jsonl" > "$ROOT/whole.txt"
  cmp -s "$ROOT/split.txt" "$ROOT/whole.txt" || fail "2 steps + 1 resumed differ from 3 steps on cuda:0"
}

# A study with an affine student on cuda:0: fused attention and KD-loss kernels, teacher on the
# device, statistics on the CPU; the KD losses follow the CPU study's.
case_emulated_distill() {
  distill --attention affine --run-dir "$WORK/cpu" > /dev/null 2> "$STDERR" ||
    fail "the CPU study failed: $(cat "$STDERR")"
  COTAN_CUDA_EMULATOR=1 distill --device cuda --attention affine --run-dir "$WORK/cuda" > /dev/null 2> "$STDERR" ||
    fail "the emulated CUDA study failed: $(cat "$STDERR")"
  [ -s "$WORK/cuda/table.md" ] || fail "no table"
  for run in teacher affine-linear_clip affine-sigmoid; do
    losses "$WORK/cpu/$run/metrics.jsonl" > "$ROOT/cpu.txt"
    losses "$WORK/cuda/$run/metrics.jsonl" > "$ROOT/cuda.txt"
    expect_close "$ROOT/cuda.txt" "$ROOT/cpu.txt" 1e-4 "$run: CPU and emulated CUDA losses"
  done
}

# Mixed precision: bf16 forward and backward with f32 master weights follows the f32 run to
# bf16's precision, records the dtype, and keeps the checkpoint's weights in f32.
case_mixed_precision() {
  pretrain --run-dir "$WORK/f32" > /dev/null 2> "$STDERR" || fail "the f32 run failed: $(cat "$STDERR")"
  pretrain --dtype bf16 --run-dir "$WORK/bf16" > /dev/null 2> "$STDERR" || fail "the bf16 run failed: $(cat "$STDERR")"
  losses "$WORK/f32/metrics.jsonl" > "$ROOT/f32.txt"
  losses "$WORK/bf16/metrics.jsonl" > "$ROOT/bf16.txt"
  expect_close "$ROOT/bf16.txt" "$ROOT/f32.txt" 3e-2 "f32 and bf16 losses"
  cmp -s "$ROOT/bf16.txt" "$ROOT/f32.txt" && fail "the bf16 losses equal the f32 ones bit for bit (no bf16 compute?)"
  grep -q '"dtype": "bf16"' "$WORK/bf16/checkpoint/trainer.json" || fail "the checkpoint does not record bf16"
  head -c 4096 "$WORK/bf16/checkpoint/model.safetensors" | grep -q 'BF16' && fail "the master weights are not f32"
  expect_error "--dtype i32|expected f32, bf16 or f64" pretrain --dtype i32 --run-dir "$WORK/bad"
  # bf16 on cuda:0 through the emulator: the bf16 attention and KD-loss kernels in a study.
  COTAN_CUDA_EMULATOR=1 distill --device cuda --dtype bf16 --attention affine --run-dir "$WORK/study" \
    > /dev/null 2> "$STDERR" || fail "the bf16 study on cuda:0 failed: $(cat "$STDERR")"
  [ -s "$WORK/study/table.md" ] || fail "no table from the bf16 study"
}

# --tf32 is refused off CUDA devices, before anything is written; on cuda:0 (the emulator, whose
# matmul stays exact) a run takes it and records it.
case_tf32() {
  expect_error "--tf32|CUDA matmuls|cpu" pretrain --tf32 --run-dir "$WORK/cpu"
  [ ! -e "$WORK/cpu" ] || fail "the run directory was created"
  expect_error "--tf32|CUDA matmuls" "$COTAN" bench matmul --tf32 --sizes 64 --repeat 1
  COTAN_CUDA_EMULATOR=1 pretrain --device cuda --tf32 --steps 1 --run-dir "$WORK/tf32" > /dev/null 2> "$STDERR" ||
    fail "the run with --tf32 on cuda:0 failed: $(cat "$STDERR")"
  grep -q '"tf32": true' "$WORK/tf32/checkpoint/trainer.json" || fail "the checkpoint does not record tf32"
}

# Every op of the gradcheck table on cuda:0 against the CPU: output and gradients.
case_emulated_gradcheck() {
  COTAN_CUDA_EMULATOR=1 "$COTAN" gradcheck --device cuda > "$STDOUT" 2> "$STDERR" ||
    fail "gradcheck --device cuda failed: $(grep FAIL "$STDOUT" | head -n 5) $(head -n 3 "$STDERR")"
  grep -q ' 0 failed' "$STDOUT" || fail "no summary line: $(tail -n 1 "$STDOUT")"
}

run_case
