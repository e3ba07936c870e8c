# `cotan teacher-logits` and `cotan distill --teacher-logits`: offline top-k targets, end to end.
# Usage: sh teacher_logits.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# A pretrained teacher in $WORK/teacher and byte shards of the corpus in $WORK/shards.
setup() {
  pretrain --steps 4 --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > /dev/null 2>&1 || fail "the teacher's run failed"
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" --shard-tokens 2000 > /dev/null 2>&1 || fail "tokenize failed"
}

# The "FIELD" values of the step rows of a metrics.jsonl, one a line.
field() {  # FILE FIELD
  sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" "$1"
}

# Fails unless the two files hold as many numbers, each pair within TOL relative.
close() {  # FILE_A FILE_B TOL WHAT
  [ -s "$1" ] && [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] || fail "$4: $(wc -l < "$1") values against $(wc -l < "$2")"
  paste "$1" "$2" | awk -v tol="$3" '{ d = $1 - $2; if (d < 0) d = -d; m = ($2 < 0 ? -$2 : $2);
    if (d > tol * (m > 1 ? m : 1)) { print "line " NR ": " $1 " vs " $2; bad = 1 } } END { exit bad }' > "$ROOT/diff" ||
    fail "$4 differ: $(cat "$ROOT/diff")"
}

case_teacher_logits_dense() {
  setup
  "$COTAN" teacher-logits --teacher "$WORK/teacher" --data "$WORK/shards" --top-k 257 --temperature 2 --seq-len 16 \
    --out "$WORK/topk" > "$STDOUT" 2> "$STDERR" || fail "teacher-logits failed: $(cat "$STDERR")"
  [ -f "$WORK/topk/train-00000.topk" ] && [ -f "$WORK/topk/val-00000.topk" ] || fail "no top-k files: $(ls "$WORK/topk")"
  [ "$(head -c 8 "$WORK/topk/train-00000.topk")" = COTANTPK ] || fail "the magic is not COTANTPK"
  grep -q "^teacher-logits: " "$STDERR" || fail "no progress summary: $(cat "$STDERR")"
  # Offline: no teacher is loaded or pretrained.
  distill --teacher-logits "$WORK/topk" --data "$WORK/shards" --temperature 2 --run-dir "$WORK/offline" \
    > "$STDOUT" 2> "$STDERR" || fail "distill --teacher-logits failed: $(cat "$STDERR")"
  grep -qF "offline top-257 targets" "$STDOUT" || fail "not offline: $(cat "$STDOUT")"
  [ ! -e "$WORK/offline/teacher" ] && [ ! -e "$WORK/cache/teachers" ] || fail "a teacher was pretrained"
  # The dense run in the same windows.
  distill --teacher "$WORK/teacher" --teacher-steps 0 --aligned-windows --data "$WORK/shards" --temperature 2 \
    --run-dir "$WORK/dense" > "$STDOUT" 2> "$STDERR" || fail "dense distill failed: $(cat "$STDERR")"
  for f in loss kd; do
    field "$WORK/offline/softmax/metrics.jsonl" $f > "$ROOT/a"
    field "$WORK/dense/softmax/metrics.jsonl" $f > "$ROOT/b"
    close "$ROOT/a" "$ROOT/b" 1e-5 "the $f of the offline and the dense runs"
  done
}

case_teacher_logits_resume() {
  setup
  tl() { "$COTAN" teacher-logits --teacher "$WORK/teacher" --data "$WORK/shards" --top-k "${K:-5}" --seq-len 16 --out "$WORK/topk"; }
  tl > "$STDOUT" 2> "$STDERR" || fail "teacher-logits failed: $(cat "$STDERR")"
  cp "$WORK/topk/train-00001.topk" "$ROOT/saved"
  rm "$WORK/topk/train-00001.topk"
  tl > "$STDOUT" 2> "$STDERR" || fail "the rerun failed: $(cat "$STDERR")"
  grep -qF "kept 3 finished files" "$STDOUT" || fail "finished files not kept: $(cat "$STDOUT")"
  grep -qF "wrote 1 file" "$STDOUT" || fail "not one file written: $(cat "$STDOUT")"
  cmp -s "$ROOT/saved" "$WORK/topk/train-00001.topk" || fail "the rewritten file differs"
  K=6 expect_error "$WORK/topk/train-00000.topk exists with top-k 5 but this run has 6" tl
  # Mismatches with the run, named on both sides.
  expect_error "made with temperature 1 but the run uses 2" \
    distill --teacher-logits "$WORK/topk" --data "$WORK/shards" --temperature 2 --run-dir "$WORK/s1"
  expect_error "windows of seq_len 16 but the run uses seq_len 8" \
    distill --teacher-logits "$WORK/topk" --data "$WORK/shards" --seq-len 8 --run-dir "$WORK/s2"
  printf 'X' | dd of="$WORK/topk/val-00000.topk" bs=1 seek=200 conv=notrunc 2> /dev/null
  expect_error "$WORK/topk/val-00000.topk: checksum mismatch" \
    distill --teacher-logits "$WORK/topk" --data "$WORK/shards" --run-dir "$WORK/s3"
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards2" --shard-tokens 1500 > /dev/null 2>&1 || fail "tokenize failed"
  expect_error "positions but $WORK/shards2/train-00000.tok has" \
    distill --teacher-logits "$WORK/topk" --data "$WORK/shards2" --run-dir "$WORK/s4"
  # The same size, another token: the checksum tells.
  cp -r "$WORK/shards" "$WORK/shards3"
  printf 'X' | dd of="$WORK/shards3/train-00001.tok" bs=1 seek=40 conv=notrunc 2> /dev/null
  expect_error "$WORK/shards3/train-00001.tok has|different shards" \
    distill --teacher-logits "$WORK/topk" --data "$WORK/shards3" --run-dir "$WORK/s5"
  [ ! -e "$WORK/s1" ] && [ ! -e "$WORK/s2" ] && [ ! -e "$WORK/s3" ] && [ ! -e "$WORK/s4" ] && [ ! -e "$WORK/s5" ] || fail "a run directory was created"
}

# A teacher with another tokenizer than the shards': refused, naming both.
case_teacher_logits_tokenizer() {
  setup
  cp "$(cd "$(dirname "$0")/../tokenizer/fixtures" && pwd)/qwen2/tokenizer.json" "$WORK/teacher/"
  expect_error "$WORK/shards/train-00000.tok was made with the byte tokenizer|the teacher $WORK/teacher has tokenizer" \
    "$COTAN" teacher-logits --teacher "$WORK/teacher" --data "$WORK/shards" --top-k 4 --seq-len 16 --out "$WORK/topk"
  [ ! -e "$WORK/topk" ] || fail "the output directory was created"
}

run_case
