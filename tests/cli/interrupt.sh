# Ctrl-C: `cotan pretrain` and `cotan distill` stop with a checkpoint and status 130, and the
# command they print continues them to the results of an uninterrupted run.
# Usage: sh interrupt.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# Waits until FILE has at least N lines; fails when PID ends first or after 30 s.
wait_for_lines() {  # FILE N PID
  i=0
  while [ $i -lt 1500 ]; do
    [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return 0
    kill -0 "$3" 2> /dev/null || return 1
    sleep 0.02
    i=$((i + 1))
  done
  return 1
}

# Sends SIGINT to PID and checks the exit status, the checkpoint and the messages; the printed
# "continue with:" command is left in $resume.
interrupt() {  # PID CHECKPOINT_DIR
  kill -INT "$1"
  wait "$1"
  rc=$?
  [ $rc -eq 130 ] || fail "exit status $rc after Ctrl-C instead of 130: $(cat "$STDERR")"
  [ -f "$2/trainer.json" ] || fail "no checkpoint in $2"
  grep -qF "interrupted at step $(checkpoint_step "$2"): checkpoint written to $2" "$STDERR" ||
    fail "no 'interrupted at step' line: $(cat "$STDERR")"
  grep -q '^cotan: ' "$STDERR" && fail "an error after Ctrl-C: $(cat "$STDERR")"
  resume=$(sed -n 's/^continue with: cotan //p' "$STDERR")
  [ -n "$resume" ] || fail "no 'continue with:' line: $(cat "$STDERR")"
  echo "  exit $rc at step $(checkpoint_step "$2"); continue with: cotan $resume"
}

# Runs $resume with this cotan.
continue_run() {
  eval "\"\$COTAN\" $resume" > "$STDOUT" 2> "$STDERR" || fail "resuming failed: $(cat "$STDERR")"
}

case_pretrain_ctrl_c() {
  pretrain --steps 300 --run-dir "$WORK/whole" > /dev/null 2>&1 || fail "the uninterrupted run failed"
  (EXEC=exec; pretrain --steps 300 --run-dir "$WORK/run") > "$STDOUT" 2> "$STDERR" &
  pid=$!
  wait_for_lines "$WORK/run/metrics.jsonl" 5 $pid || fail "training did not start"
  interrupt $pid "$WORK/run/checkpoint"
  continue_run
  [ "$(checkpoint_step "$WORK/run/checkpoint")" = 300 ] || fail "the resumed run did not finish"
  deterministic_metrics "$WORK/whole/metrics.jsonl" > "$ROOT/whole.jsonl"
  deterministic_metrics "$WORK/run/metrics.jsonl" > "$ROOT/run.jsonl"
  [ "$(wc -l < "$ROOT/run.jsonl")" -eq 300 ] || fail "the resumed metrics.jsonl has $(wc -l < "$ROOT/run.jsonl") rows"
  cmp -s "$ROOT/whole.jsonl" "$ROOT/run.jsonl" || fail "the resumed metrics differ from the uninterrupted run's"
  cmp -s "$WORK/whole/checkpoint/model.safetensors" "$WORK/run/checkpoint/model.safetensors" ||
    fail "the resumed weights differ from the uninterrupted run's"
}

# Two students (affine with two alpha functions); Ctrl-C lands in the second, so the first is
# reused and the second resumed.
case_distill_ctrl_c() {
  args="--attention affine --teacher-steps 20 --steps 100"
  distill $args --run-dir "$WORK/whole" > /dev/null 2>&1 || fail "the uninterrupted study failed"
  (EXEC=exec; distill $args --run-dir "$WORK/study") > "$STDOUT" 2> "$STDERR" &
  pid=$!
  second="$WORK/study/affine-sigmoid"
  wait_for_lines "$second/metrics.jsonl" 5 $pid || fail "the second student did not start"
  interrupt $pid "$second/checkpoint"
  remember "$WORK/study/affine-linear_clip/checkpoint"
  continue_run
  grep -qF "student: affine(sigmoid) (seed 0), resuming" "$STDOUT" || fail "the second student was not resumed"
  check_unchanged "$WORK/study/affine-linear_clip/checkpoint"
  cmp -s "$WORK/whole/table.md" "$WORK/study/table.md" || fail "table.md differs from the uninterrupted study's"
  cmp -s "$WORK/whole/table.csv" "$WORK/study/table.csv" || fail "table.csv differs from the uninterrupted study's"
  for run in affine-linear_clip affine-sigmoid; do
    deterministic_metrics "$WORK/whole/$run/metrics.jsonl" > "$ROOT/whole.jsonl"
    deterministic_metrics "$WORK/study/$run/metrics.jsonl" > "$ROOT/run.jsonl"
    cmp -s "$ROOT/whole.jsonl" "$ROOT/run.jsonl" || fail "$run: the metrics differ from the uninterrupted study's"
  done
}

run_case
