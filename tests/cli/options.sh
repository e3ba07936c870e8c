# Numeric options out of range: one line naming the option and its valid range, and nothing
# written. Usage: sh options.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# expect_range OPTION VALUE RANGE COMMAND...: COMMAND with --OPTION VALUE fails naming both and RANGE.
expect_range() {
  option=$1 value=$2 range=$3
  shift 3
  expect_error "[option] --$option $value: expected $range" "$@" "--$option" "$value"
}

case_pretrain_bad_options() {
  expect_range clip nan "a number in [0, inf) (0: off)" pretrain --run-dir "$WORK/run"
  expect_range clip -1 "a number in [0, inf) (0: off)" pretrain --run-dir "$WORK/run"
  expect_range warmup -3 "an integer in [0, inf]" pretrain --run-dir "$WORK/run"
  expect_range eval-every -1 "an integer in [0, inf] (0: at the end)" pretrain --run-dir "$WORK/run"
  expect_range checkpoint-every -1 "an integer in [0, inf] (0: at the end)" pretrain --run-dir "$WORK/run"
  expect_range stop-after -1 "an integer in [0, inf] (0: run to the end)" pretrain --run-dir "$WORK/run"
  expect_range seed -1 "an integer in [0, 18446744073709551615]" pretrain --run-dir "$WORK/run"
  expect_range seed 18446744073709551616 "an integer in [0, 18446744073709551615]" pretrain --run-dir "$WORK/run"
  expect_range lr 0 "a number in (0, inf)" pretrain --run-dir "$WORK/run"
  expect_range lr inf "a number in (0, inf)" pretrain --run-dir "$WORK/run"
  expect_range kd-ratio 1.5 "a number in [0, 1]" pretrain --run-dir "$WORK/run"
  expect_range temperature 0 "a number in (0, inf)" pretrain --run-dir "$WORK/run"
  expect_range decay-fraction 2 "a number in [0, 1]" pretrain --run-dir "$WORK/run"
  expect_range batch-size 0 "an integer in [1, 1048576]" pretrain --run-dir "$WORK/run"
  expect_range seq-len -5 "an integer in [1, 16777216]" pretrain --run-dir "$WORK/run"
  expect_range keep-checkpoints 0 "an integer in [1, 1000]" pretrain --run-dir "$WORK/run"
  expect_range steps 0 "an integer in [1, inf]" pretrain --run-dir "$WORK/run"
  expect_range threads -2 "an integer in [0, 4096] (0: all cores)" pretrain --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "the run directory was created"
}

case_distill_bad_options() {
  expect_range seeds 0 "an integer in [1, 1000]" distill --run-dir "$WORK/study"
  expect_range teacher-steps -1 "an integer in [0, inf]" distill --run-dir "$WORK/study"
  expect_error "--teacher $WORK/tiny.json has no weights to load, so it is pretrained first: --teacher-steps 0 must be at least 1" \
    distill --teacher-steps 0 --run-dir "$WORK/study"
  expect_range clip nan "a number in [0, inf) (0: off)" distill --run-dir "$WORK/study"
  expect_range seed -1 "an integer in [0, 18446744073709551615]" distill --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"
  [ ! -e "$WORK/cache" ] || fail "the cache directory was created"
}

case_threads_on_every_command() {
  for command in info params gradcheck "bench ops" tokenize plan; do
    # shellcheck disable=SC2086
    expect_range threads 100000 "an integer in [0, 4096] (0: all cores)" "$COTAN" $command
  done
  expect_range seed -1 "an integer in [0, 18446744073709551615]" "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards"
  expect_range val-fraction 1.5 "a number in [0, 1]" "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards"
  [ ! -e "$WORK/shards" ] || fail "the output directory was created"
  # A bounded run: one thread, reported by info.
  out=$("$COTAN" info --threads 1 --json) || fail "info --threads 1 failed"
  case "$out" in
    *'"threads": 1,'*) ;;
    *) fail "info --threads 1 does not report 1 thread: $out" ;;
  esac
  pretrain --threads 1 --run-dir "$WORK/run" > /dev/null 2> "$STDERR" || fail "pretrain --threads 1 failed: $(cat "$STDERR")"
}

# The benches' and gradcheck's numeric options too.
case_bench_bad_options() {
  expect_range heads 0 "an integer in [1, 4096]" "$COTAN" bench attention
  expect_range repeat -1 "an integer in [1, 100000]" "$COTAN" bench matmul
  expect_range vocab 1 "an integer in [2, 16777216]" "$COTAN" bench kd-loss
  expect_range kd-ratio 2 "a number in [0, 1]" "$COTAN" bench kd-loss
  expect_range steps 0 "an integer in [1, 100000]" "$COTAN" bench train --no-torch
  expect_range turn-warmup -1 "an integer in [0, 1000]" "$COTAN" bench train --no-torch
  expect_range size 0 "an integer in [1, 4294967296]" "$COTAN" bench ops
  expect_range seed -1 "an integer in [0, 18446744073709551615]" "$COTAN" gradcheck
}

# --phi and --affine-n wherever a kind is chosen: a name not known, or either for a kind without an
# affine core, is one line; the values reach the config (params, the benches, the study's students).
case_affine_options() {
  for command in params "bench attention" "bench train --no-torch" distill; do
    # shellcheck disable=SC2086
    expect_error "[option] --phi tanh: expected linear_clip or sigmoid" "$COTAN" $command --phi tanh
    # shellcheck disable=SC2086
    expect_error "[option] --affine-n most: expected visible or full" "$COTAN" $command --affine-n most
  done
  expect_error "[option] --phi sigmoid: applies to the affine kinds (affine, affine_gated), not softmax" \
    "$COTAN" params --attention softmax --phi sigmoid
  expect_error "[option] --affine-n full: applies to the affine kinds (affine, affine_gated), not sink" \
    "$COTAN" bench train --attention sink --affine-n full
  expect_error "[option] --phi sigmoid: applies to the affine kinds (affine, affine_gated), not softmax, sink" \
    "$COTAN" bench attention --attention softmax,sink --phi sigmoid
  expect_error "[option] --affine-n full: applies to the affine kinds (affine, affine_gated), not gated" \
    distill --attention gated --affine-n full --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"

  out=$("$COTAN" params --attention affine_gated --phi sigmoid --affine-n full --json) || fail "params failed"
  case "$out" in
    *'"phi":"sigmoid","affine_n":"full"'*) ;;
    *) fail "params does not show phi and affine_n: $out" ;;
  esac
  out=$("$COTAN" bench attention --attention affine --phi sigmoid --affine-n full --batch-size 1 --seq-len 8 \
    --heads 2 --dim 4 --repeat 1 --json) || fail "bench attention failed"
  case "$out" in
    *'"phi":"sigmoid","affine_n":"full"'*) ;;
    *) fail "bench attention does not show phi and affine_n: $out" ;;
  esac
  # One affine student with the chosen settings, named by them.
  distill --attention affine --phi sigmoid --affine-n full --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" ||
    fail "distill --phi sigmoid --affine-n full failed: $(cat "$STDERR")"
  [ -d "$WORK/study/affine-sigmoid-affine_n-full" ] || fail "no student folder: $(ls "$WORK/study")"
  [ ! -e "$WORK/study/affine-linear_clip" ] || fail "a linear_clip student was trained too"
  grep -q '"phi": "sigmoid"' "$WORK/study/affine-sigmoid-affine_n-full/model/config.json" &&
    grep -q '"affine_n": "full"' "$WORK/study/affine-sigmoid-affine_n-full/model/config.json" ||
    fail "the student's config lacks the options: $(cat "$WORK/study/affine-sigmoid-affine_n-full/model/config.json")"
}

# Help shows defaults as written, and the top-level help every command and benchmark.
case_help_defaults() {
  "$COTAN" pretrain --help > "$STDOUT" || fail "pretrain --help failed"
  grep -qF -- "--lr arg (=0.003)" "$STDOUT" || fail "--lr's default is not shown as 0.003: $(grep -- --lr "$STDOUT")"
  grep -qF -- "--weight-decay arg (=0.1)" "$STDOUT" || fail "--weight-decay's default: $(grep -- --weight-decay "$STDOUT")"
  ! grep -q "0000000" "$STDOUT" || fail "a default printed with all its binary digits: $(grep 0000000 "$STDOUT")"
  "$COTAN" --help > "$STDOUT" || fail "--help failed"
  grep -qF "benchmarks: matmul, ops, attention, kd-loss, train" "$STDOUT" || fail "the help lacks a benchmark: $(cat "$STDOUT")"
  for option in --attention --batch-size --seq-len; do
    "$COTAN" bench attention --help | grep -qF -- "$option" || fail "bench attention has no $option"
  done
}

# distill on a terminal (a pseudo-terminal from script(1)): a live bar with the run and the whole
# study's ETA; in a log, plain lines.
case_distill_progress() {
  script -q -e -c "\"$COTAN\" distill --quick --attention sink --teacher-steps 4 --steps 4 --data \"$WORK/corpus\" \
    --seq-len 16 --batch-size 2 --run-dir \"$WORK/tty\" --cache-dir \"$WORK/cache\"" "$ROOT/tty.out" > /dev/null ||
    fail "distill under a pseudo-terminal failed: $(cat "$ROOT/tty.out")"
  tr '\r' '\n' < "$ROOT/tty.out" > "$ROOT/tty.txt"
  grep -qF "teacher [" "$ROOT/tty.txt" && grep -qF "all ETA" "$ROOT/tty.txt" || fail "no teacher bar with the study's ETA: $(cat "$ROOT/tty.txt")"
  grep -qF "student 1/1 sink [##" "$ROOT/tty.txt" || fail "no student bar: $(cat "$ROOT/tty.txt")"
  distill --attention sink --teacher-steps 4 --steps 4 --eval-every 2 --run-dir "$WORK/log" --cache-dir "$WORK/cache2" \
    > /dev/null 2> "$ROOT/log.txt" || fail "distill into a log failed"
  ! grep -q "$(printf '\r')" "$ROOT/log.txt" || fail "a log holds carriage returns"
  grep -qF "student 1/1 sink  step 4/4" "$ROOT/log.txt" || fail "no plain line in the log: $(cat "$ROOT/log.txt")"
}


# --no-fused-head: the whole logits, then the loss; the default runs the heads inside the loss in
# chunks. Both give the same losses (to f32 rounding), pretraining and distilling, and the setting
# is recorded in the run's config only when it is not the default.
case_fused_head() {
  for command in pretrain distill; do
    $command --run-dir "$WORK/$command-fused" > /dev/null 2> "$STDERR" || fail "$command failed: $(cat "$STDERR")"
    $command --run-dir "$WORK/$command-whole" --no-fused-head > /dev/null 2> "$STDERR" ||
      fail "$command --no-fused-head failed: $(cat "$STDERR")"
    fused=$(find "$WORK/$command-fused" -name metrics.jsonl | sort | tail -1)
    whole=$(find "$WORK/$command-whole" -name metrics.jsonl | sort | tail -1)
    losses "$fused" > "$WORK/fused.txt"
    losses "$whole" > "$WORK/whole.txt"
    expect_close "$WORK/fused.txt" "$WORK/whole.txt" 1e-5 "$command: the fused head's and the whole logits' losses"
    grep -rqs '"fused_head": *false' "$WORK/$command-whole" || fail "$command: --no-fused-head is not recorded"
    ! grep -rqs '"fused_head"' "$WORK/$command-fused" || fail "$command: the default is recorded"
  done
}

run_case
