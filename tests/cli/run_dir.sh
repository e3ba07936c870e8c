# The run directory's guards and recovery, end to end: one run at a time, no new run over an old
# one, resume through a torn metrics line and a cut-short checkpoint, verified checkpoints.
# Usage: sh run_dir.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# Flips bit BIT of byte OFFSET (counted from the end when negative) of FILE, in place.
flip_bit() {  # FILE OFFSET BIT
  python3 -c 'import sys
p, o, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = bytearray(open(p, "rb").read()); d[o] ^= 1 << b; open(p, "wb").write(d)' "$@"
}

case_new_run_over_old() {
  pretrain --run-dir "$WORK/run" > /dev/null 2>&1 || fail "the first run failed"
  remember "$WORK/run"
  expect_error "$WORK/run already holds a run (checkpoint/, metrics.jsonl)|--resume $WORK/run|--overwrite" \
    pretrain --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
  expect_error "--resume and --overwrite exclude each other" pretrain --resume "$WORK/run" --overwrite
  # --overwrite moves the old run aside, whole, and starts anew.
  pretrain --run-dir "$WORK/run" --overwrite > /dev/null 2> "$STDERR" || fail "--overwrite failed: $(cat "$STDERR")"
  grep -qF "moved the earlier run in $WORK/run to $WORK/run.old-1" "$STDERR" || fail "no message: $(cat "$STDERR")"
  snapshot "$WORK/run.old-1" | cmp -s - "$SNAPSHOTS/$(echo "$WORK/run" | cksum | cut -d' ' -f1)" ||
    fail "$WORK/run.old-1 is not the old run"
  [ -f "$WORK/run/checkpoint/trainer.json" ] || fail "no new run"
  # A study, the same way.
  distill --run-dir "$WORK/study" > /dev/null 2>&1 || fail "the first study failed"
  remember "$WORK/study"
  expect_error "$WORK/study already holds a study|--overwrite" distill --run-dir "$WORK/study"
  check_unchanged "$WORK/study"
  distill --run-dir "$WORK/study" --overwrite > /dev/null 2> "$STDERR" || fail "distill --overwrite failed: $(cat "$STDERR")"
  [ -f "$WORK/study.old-1/study.json" ] && [ -f "$WORK/study/table.md" ] || fail "the study was not moved aside"
}

case_second_run_in_use() {
  # A long run holds the directory; a second one fails at once, naming it.
  (EXEC=exec; pretrain --steps 1000000 --run-dir "$WORK/run" > /dev/null 2>&1) &
  pid=$!
  i=0
  while [ $i -lt 1500 ] && ! grep -q "^$pid\$" "$WORK/run/.lock" 2> /dev/null; do
    sleep 0.02
    i=$((i + 1))
  done
  expect_error "$WORK/run is in use by process $pid (|pretrain|one run at a time in a directory" \
    pretrain --run-dir "$WORK/run" --overwrite
  expect_error "$WORK/run is in use by process $pid" pretrain --run-dir "$WORK/run"
  kill -9 $pid
  wait $pid 2> /dev/null
  # The kernel drops the lock of a killed process: the directory can be taken over at once.
  pretrain --run-dir "$WORK/run" --overwrite > /dev/null 2> "$STDERR" || fail "after the kill: $(cat "$STDERR")"
}

case_torn_metrics_line() {
  pretrain --steps 6 --checkpoint-every 1 --run-dir "$WORK/whole" > /dev/null 2>&1 || fail "the whole run failed"
  pretrain --steps 6 --checkpoint-every 1 --stop-after 3 --run-dir "$WORK/run" > /dev/null 2>&1 || fail "the first part failed"
  # A crash (or a full disk) in the middle of the next line, and a checkpoint write cut short.
  printf '{"step":3,"lr":0.00' >> "$WORK/run/metrics.jsonl"
  mkdir "$WORK/run/checkpoint.tmp"
  echo partial > "$WORK/run/checkpoint.tmp/model.safetensors"
  pretrain --steps 6 --checkpoint-every 1 --resume "$WORK/run" > /dev/null 2> "$STDERR" || fail "resume failed: $(cat "$STDERR")"
  grep -qF "dropping the torn last line 4 of $WORK/run/metrics.jsonl" "$STDERR" || fail "no message: $(cat "$STDERR")"
  grep -qF "removing $WORK/run/checkpoint.tmp, left by an interrupted checkpoint write" "$STDERR" ||
    fail "no cleanup message: $(cat "$STDERR")"
  deterministic_metrics "$WORK/whole/metrics.jsonl" > "$ROOT/whole"
  deterministic_metrics "$WORK/run/metrics.jsonl" | cmp -s - "$ROOT/whole" || fail "metrics differ from the whole run's"
  # --keep-checkpoints (default 2): checkpoint/ and the one before it.
  [ -d "$WORK/run/checkpoint-5" ] && [ ! -e "$WORK/run/checkpoint-4" ] || fail "not the last 2 checkpoints: $(ls "$WORK/run")"
}

case_flipped_bit() {
  pretrain --steps 6 --stop-after 3 --run-dir "$WORK/run" > /dev/null 2>&1 || fail "the first part failed"
  flip_bit "$WORK/run/checkpoint/model.safetensors" -3 6
  remember "$WORK/run"
  expect_error "[resume] $WORK/run/checkpoint/model.safetensors: checksum mismatch|the file is corrupted" \
    pretrain --steps 6 --resume "$WORK/run"
  check_unchanged "$WORK/run"
  # A model directory too: the study's cached teacher, reused by the next study.
  distill --run-dir "$WORK/study" > /dev/null 2>&1 || fail "the first study failed"
  teacher=$(find "$WORK/cache/teachers" -name model.safetensors)
  [ -f "$teacher" ] || fail "no cached teacher"
  flip_bit "$teacher" -5 3
  expect_error "$teacher: checksum mismatch|the file is corrupted" distill --run-dir "$WORK/study2"
}

# A failed start leaves the run directory reusable: inputs that only a run checks (--tf32 on the
# CPU, a seq-len above the models' context) fail before anything is written, and a corrected rerun
# into the same --run-dir needs no --overwrite. A directory holding only the study.json of a start
# that trained nothing is started over.
case_failed_start_rerun() {
  mkdir -p "$WORK/study"
  expect_error "--tf32 is a mode of the CUDA matmuls; this run is on cpu" distill --tf32 --run-dir "$WORK/study"
  [ -z "$(ls -A "$WORK/study")" ] || fail "the failed start wrote $(ls -A "$WORK/study")"
  expect_error "seq_len 4096 is above the student's max_position_embeddings" distill --seq-len 4096 --run-dir "$WORK/study"
  [ -z "$(ls -A "$WORK/study")" ] || fail "the failed start wrote $(ls -A "$WORK/study")"
  expect_error "--tf32 is a mode of the CUDA matmuls" pretrain --tf32 --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "the failed pretraining created its run directory"
  distill --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" || fail "the corrected rerun failed: $(cat "$STDERR")"
  [ -s "$WORK/study/table.md" ] || fail "the rerun wrote no table"
  # A start that wrote study.json and then failed (as an input only a student's run checks could).
  mkdir -p "$WORK/started"
  cp "$WORK/study/study.json" "$WORK/started/study.json"
  distill --run-dir "$WORK/started" --steps 2 > "$STDOUT" 2> "$STDERR" || fail "the rerun over study.json failed: $(cat "$STDERR")"
  grep -qF "starting over in $WORK/started: it holds only the study.json of a study that trained nothing" "$STDOUT" ||
    fail "no message: $(cat "$STDOUT")"
  grep -q '"student_steps": 2' "$WORK/started/study.json" || fail "study.json is not the rerun's: $(cat "$WORK/started/study.json")"
  # A directory holding more than that is still refused.
  expect_error "$WORK/study already holds a study|--overwrite" distill --run-dir "$WORK/study"
}

run_case
