# Bad input to `cotan pretrain` and `cotan distill`: each case checks the exit status, the one
# line on stderr and that no file was overwritten. Usage: sh bad_input.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# A finished pretraining run in $WORK/run (3 steps, checkpoint at the end), remembered.
pretrain_run() {
  pretrain --run-dir "$WORK/run" > /dev/null 2>&1 || fail "the first run failed"
  remember "$WORK/run"
}

# A finished study in $WORK/study (teacher and one student, 3 steps each), remembered.
study_run() {
  distill --run-dir "$WORK/study" > /dev/null 2>&1 || fail "the first study failed"
  remember "$WORK/study"
}

# ---- a missing or empty corpus ----

case_pretrain_missing_corpus() {
  pretrain_run
  expect_error "$WORK/missing: no such file or directory" \
    pretrain --data "$WORK/missing" --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
}

case_distill_missing_corpus() {
  expect_error "$WORK/missing: no such file or directory" \
    distill --data "$WORK/missing" --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"
  [ ! -e "$WORK/cache" ] || fail "the cache directory was created"
}

case_pretrain_empty_corpus() {
  pretrain_run
  mkdir "$WORK/empty"
  expect_error "$WORK/empty: the corpus is empty" \
    pretrain --data "$WORK/empty" --run-dir "$WORK/run"
  printf '\n  \n' > "$WORK/blank.txt"
  expect_error "$WORK/blank.txt: the corpus is empty" \
    pretrain --data "$WORK/blank.txt" --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
}

case_distill_empty_corpus() {
  mkdir "$WORK/empty"
  expect_error "$WORK/empty: the corpus is empty" \
    distill --data "$WORK/empty" --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"
}

# ---- seq_len longer than the data ----

case_pretrain_seq_len() {
  pretrain_run
  expect_error "seq_len 100000 needs at least 100001 tokens|training split has" \
    pretrain --seq-len 100000 --allow-longer-context --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
  expect_error "seq_len 100000 needs at least 100001 tokens" \
    pretrain --seq-len 100000 --allow-longer-context --run-dir "$WORK/new"
  [ ! -e "$WORK/new" ] || fail "the run directory was created"
  # Beyond the model's context: an error before anything else, unless allowed.
  expect_error "seq_len 4096 is above the student's max_position_embeddings 2048|--allow-longer-context" \
    pretrain --seq-len 4096 --run-dir "$WORK/new"
  [ ! -e "$WORK/new" ] || fail "the run directory was created"
  pretrain --seq-len 4096 --allow-longer-context --batch-size 1 --steps 1 --run-dir "$WORK/long" > /dev/null 2> "$STDERR" ||
    fail "--allow-longer-context did not allow it: $(cat "$STDERR")"
}

case_distill_seq_len() {
  study_run
  expect_error "seq_len 100000 needs at least 100001 tokens" \
    distill --seq-len 100000 --allow-longer-context --resume "$WORK/study"
  check_unchanged "$WORK/study"
  expect_error "seq_len 100000 needs at least 100001 tokens" \
    distill --seq-len 100000 --allow-longer-context --run-dir "$WORK/new"
  [ ! -e "$WORK/new" ] || fail "the run directory was created"
  expect_error "seq_len 100000 is above the student's max_position_embeddings 2048|--allow-longer-context" \
    distill --seq-len 100000 --run-dir "$WORK/new"
  [ ! -e "$WORK/new" ] || fail "the run directory was created"
}

# A model vocabulary smaller than the data's ids: found before the first step.
case_pretrain_vocab_below_data() {
  make_config "$WORK/narrow.json" softmax 100
  expect_error "the training data holds token id 256, outside the model's vocabulary of 100 (vocab_size)" \
    pretrain --config "$WORK/narrow.json" --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "the run directory was created"
}

# ---- configs from untrusted files ----

case_config_overflow() {
  printf '%s\n' '{"model_type": "llama", "vocab_size": 257, "hidden_size": 4611686018427387904,' \
    '"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 24}' > "$WORK/huge.json"
  expect_error "$WORK/huge.json: hidden_size 4611686018427387904 is above the limit of 16777216" \
    "$COTAN" params --config "$WORK/huge.json"
  expect_error "$WORK/huge.json: hidden_size 4611686018427387904 is above the limit" \
    pretrain --config "$WORK/huge.json" --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "the run directory was created"
  sed 's/4611686018427387904,/16, "head_dim": -8,/' "$WORK/huge.json" > "$WORK/negative.json"
  expect_error "$WORK/negative.json: head_dim must be positive, got -8" \
    "$COTAN" params --config "$WORK/negative.json"
}

# ---- teacher and student vocabularies that differ ----

case_distill_vocab() {
  make_config "$WORK/wide.json" softmax 300
  expect_error "teacher vocabulary 300 ($WORK/wide.json) differs from the student's 257|--slice-teacher-vocab" \
    distill --teacher "$WORK/wide.json" --run-dir "$WORK/study"
  [ ! -e "$WORK/study" ] || fail "the run directory was created"
  [ ! -e "$WORK/cache" ] || fail "the cache directory was created"
}

# ---- a teacher from a model directory ----

# Its weights are loaded and frozen: no pretraining, no cache; a damaged one fails before any write.
case_distill_teacher_dir() {
  pretrain --steps 4 --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > /dev/null 2>&1 || fail "the teacher's run failed"
  distill --teacher "$WORK/teacher" --teacher-steps 0 --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" ||
    fail "distilling from $WORK/teacher failed: $(cat "$STDERR")"
  grep -qF "teacher: $WORK/teacher (" "$STDOUT" && grep -qF "parameters, loaded)" "$STDOUT" ||
    fail "the teacher was not loaded: $(cat "$STDOUT")"
  [ ! -e "$WORK/study/teacher" ] && [ ! -e "$WORK/cache" ] || fail "a teacher was pretrained or cached"
  rm "$WORK/teacher/model.safetensors"
  expect_error "$WORK/teacher/model.safetensors: missing ($WORK/teacher/checksums.json records it)" \
    distill --teacher "$WORK/teacher" --run-dir "$WORK/study2"
  rm "$WORK/teacher/checksums.json"  # a directory holding a config.json alone
  expect_error "$WORK/teacher: no model.safetensors or model.safetensors.index.json" \
    distill --teacher "$WORK/teacher" --run-dir "$WORK/study2"
  [ ! -e "$WORK/study2" ] || fail "the run directory was created"
}

# ---- an HF teacher directory with its tokenizer.json, and a JSONL corpus ----

FIXTURES=$(cd "$(dirname "$0")/../tokenizer/fixtures" && pwd)

make_jsonl_corpus() {  # FILE
  i=0
  while [ $i -lt 150 ]; do
    printf '{"text": "Record %d: the quick brown fox jumps over the lazy dog, %d times over."}\n' $i $((i * 7919 % 1000))
    i=$((i + 1))
  done > "$1"
}

case_distill_hf_teacher_jsonl() {
  make_jsonl_corpus "$WORK/web.jsonl"
  make_config "$WORK/hf.json" softmax 4505  # the qwen2 fixture tokenizer's 4505 ids
  pretrain --config "$WORK/hf.json" --tokenizer "$FIXTURES/qwen2" --data "$WORK/web.jsonl" --cache-dir "$WORK/cache" \
    --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > "$STDOUT" 2> "$STDERR" || fail "the teacher's run failed: $(cat "$STDERR")"
  [ -f "$WORK/teacher/tokenizer.json" ] || fail "--out did not get the tokenizer.json"
  distill --teacher "$WORK/teacher" --student "$WORK/hf.json" --data "$WORK/web.jsonl" --teacher-steps 0 \
    --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" || fail "distilling from $WORK/teacher failed: $(cat "$STDERR")"
  grep -qF "parameters, loaded)" "$STDOUT" || fail "the teacher was not loaded: $(cat "$STDOUT")"
  grep -qF "data: reusing $WORK/cache/tokens/" "$STDERR" ||
    fail "the corpus was not read from the shards the pretraining cached: $(cat "$STDERR")"
  shard=$(find "$WORK/cache/tokens" -name train-00000.tok | head -n 1)
  [ -n "$shard" ] || fail "no cached shards under $WORK/cache/tokens"
  [ "$(od -An -tu4 -j28 -N4 --endian=little "$shard" | tr -d ' ')" = 4505 ] || fail "$shard does not record the 4505 ids"
  [ -f "$WORK/study/table.md" ] || fail "no table.md"
}

# A preset student takes an HF teacher's vocabulary, tokenizer and special tokens, saying so; a
# student config of its own that differs is refused as before.
case_distill_preset_student() {
  teacher=$(cd "$(dirname "$0")/../hf/fixtures/llama_with_tokenizer" && pwd)  # vocab_size 64, bos 1, eos 2
  distill --teacher "$teacher" --teacher-steps 0 --student tiny-student --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" ||
    fail "distilling a preset student from $teacher failed: $(cat "$STDERR")"
  [ "$(grep -c "^student: tiny-student takes the teacher's vocabulary (64 ids), tokenizer and special tokens ($teacher/tokenizer.json)$" "$STDOUT")" -eq 1 ] ||
    fail "not one line saying the student takes the teacher's vocabulary: $(cat "$STDOUT")"
  model=$WORK/study/softmax/model
  grep -q '"vocab_size": 64,' "$model/config.json" || fail "the student's vocab_size is not 64: $(cat "$model/config.json")"
  grep -q '"bos_token_id": 1,' "$model/config.json" && grep -q '"eos_token_id": 2,' "$model/config.json" ||
    fail "the student's config.json lacks the teacher's special token ids: $(cat "$model/config.json")"
  cmp -s "$teacher/tokenizer.json" "$model/tokenizer.json" || fail "the student's tokenizer.json is not the teacher's"
  expect_error "teacher vocabulary 64 ($teacher) differs from the student's 257 ($WORK/tiny.json)|--slice-teacher-vocab" \
    distill --teacher "$teacher" --teacher-steps 0 --student "$WORK/tiny.json" --run-dir "$WORK/study2"
  [ ! -e "$WORK/study2" ] || fail "the run directory was created"
}

case_distill_tokenizer_mismatch() {
  make_jsonl_corpus "$WORK/web.jsonl"
  make_config "$WORK/hf.json" softmax 4505
  pretrain --config "$WORK/hf.json" --tokenizer "$FIXTURES/qwen2" --data "$WORK/web.jsonl" --cache-dir "$WORK/cache" \
    --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > /dev/null 2>&1 || fail "the teacher's run failed"
  "$COTAN" tokenize "$WORK/web.jsonl" --out "$WORK/bytes" > /dev/null 2>&1 || fail "tokenize failed"
  expect_error "$WORK/bytes was made with the byte tokenizer|$WORK/teacher/tokenizer.json|vocabulary 4505" \
    distill --teacher "$WORK/teacher" --student "$WORK/hf.json" --data "$WORK/bytes" --teacher-steps 0 --run-dir "$WORK/study"
  "$COTAN" tokenize "$WORK/web.jsonl" --tokenizer "$FIXTURES/qwen2" --out "$WORK/qwen" > /dev/null 2>&1 || fail "tokenize failed"
  expect_error "$WORK/qwen was made with tokenizer|vocabulary 4505|the byte tokenizer (vocabulary 257)" \
    pretrain --data "$WORK/qwen" --run-dir "$WORK/run"
  [ ! -e "$WORK/study" ] && [ ! -e "$WORK/run" ] || fail "a run directory was created"
}

# ---- an unknown attention kind or option ----

case_pretrain_unknown_attention() {
  pretrain_run
  make_config "$WORK/odd.json" cubic
  expect_error "--config $WORK/odd.json|unknown attention kind 'cubic'|softmax, sink, affine, gated, affine_gated" \
    pretrain --config "$WORK/odd.json" --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
}

case_distill_unknown_attention() {
  study_run
  expect_error "--attention cubic|unknown attention kind 'cubic'" \
    distill --attention cubic --resume "$WORK/study"
  make_config "$WORK/odd.json" cubic
  expect_error "--student $WORK/odd.json|unknown attention kind 'cubic'" \
    distill --student "$WORK/odd.json" --resume "$WORK/study"
  check_unchanged "$WORK/study"
}

case_pretrain_unknown_option() {
  pretrain_run
  expect_error "unrecognised option '--learning-rate'" \
    pretrain --learning-rate 0.1 --run-dir "$WORK/run"
  expect_error "--loss mse: unknown KD loss 'mse'" \
    pretrain --loss mse --run-dir "$WORK/run"
  expect_error "--steps" pretrain --steps many --run-dir "$WORK/run"
  check_unchanged "$WORK/run"
}

case_distill_unknown_option() {
  study_run
  expect_error "unrecognised option '--students'" \
    distill --students 3 --resume "$WORK/study"
  expect_error "--loss mse: unknown KD loss 'mse'" \
    distill --loss mse --resume "$WORK/study"
  check_unchanged "$WORK/study"
}

# ---- a NaN or Inf loss ----

# lr 1e30 without clipping sends the weights past the float range after the first step.
case_pretrain_nan() {
  diverge="--lr 1e30 --clip 0 --checkpoint-every 1"
  expect_error "[train] step |last good checkpoint: $WORK/run/checkpoint at step " \
    pretrain $diverge --steps 20 --run-dir "$WORK/run"
  step=$(sed -n 's/^cotan: \[train\] step \([0-9]*\): .*/\1/p' "$STDERR")
  [ -n "$step" ] || fail "no step named"
  grep -qE "the (loss|gradient norm) is (nan|-?inf)" "$STDERR" || fail "no NaN or Inf named"
  grep -qF "at step $step)" "$STDERR" || fail "the last good checkpoint is not the step before the failure"
  [ "$(checkpoint_step "$WORK/run/checkpoint")" = "$step" ] || fail "the checkpoint is not at step $step"
  [ ! -e "$WORK/run/checkpoint.tmp" ] || fail "a partial checkpoint was left"
  remember "$WORK/run/checkpoint"
  # It loads: resuming with --stop-after at its step reads every tensor and trains no step.
  pretrain $diverge --steps 20 --resume "$WORK/run" --stop-after "$step" \
    --out "$WORK/model" > /dev/null 2> "$STDERR" || fail "the last good checkpoint does not load: $(cat "$STDERR")"
  [ -s "$WORK/model/model.safetensors" ] || fail "no model saved from the last good checkpoint"
  check_unchanged "$WORK/run/checkpoint"
}

case_distill_nan() {
  expect_error "[train] step |last good checkpoint: $WORK/study/teacher/checkpoint at step " \
    distill --lr 1e30 --clip 0 --checkpoint-every 1 --teacher-steps 20 \
    --run-dir "$WORK/study"
  step=$(sed -n 's/^cotan: \[train\] step \([0-9]*\): .*/\1/p' "$STDERR")
  [ -n "$step" ] && [ "$(checkpoint_step "$WORK/study/teacher/checkpoint")" = "$step" ] ||
    fail "the teacher's checkpoint is not at the step before the failure"
  [ -z "$(ls "$WORK/cache/teachers" 2> /dev/null)" ] || fail "a diverged teacher was cached"
}

# ---- resuming from a checkpoint of another config ----

case_pretrain_resume_other_config() {
  pretrain_run
  make_config "$WORK/sink.json" sink
  expect_error "$WORK/run/checkpoint: the checkpoint was written for another model config|attention.kind is \"softmax\" in the checkpoint but \"sink\" now" \
    pretrain --config "$WORK/sink.json" --resume "$WORK/run"
  expect_error "other training settings|lr is 0.003 in the checkpoint but 0.01 now" \
    pretrain --lr 0.01 --resume "$WORK/run"
  expect_error "other training settings|seq_len is 16 in the checkpoint but 32 now" \
    pretrain --seq-len 32 --resume "$WORK/run"
  check_unchanged "$WORK/run"
}

case_distill_resume_other_config() {
  study_run
  expect_error "cannot resume $WORK/study: it was started with another config|student_steps is 3 in study.json but 5 now|it was started as: cotan distill" \
    distill --steps 5 --resume "$WORK/study"
  expect_error "variants[0].kind is \"softmax\" in study.json but \"gated\" now" \
    distill --student "$WORK/tiny.json" --attention gated --resume "$WORK/study"
  check_unchanged "$WORK/study"
}

case_resume_without_checkpoint() {
  mkdir "$WORK/empty"
  expect_error "$WORK/empty/checkpoint: no checkpoint to resume from" \
    pretrain --resume "$WORK/empty"
  expect_error "cannot resume $WORK/empty: $WORK/empty/study.json is missing" \
    distill --resume "$WORK/empty"
  [ -z "$(ls -A "$WORK/empty")" ] || fail "files were written into $WORK/empty"
  expect_error "--resume $WORK/empty and --run-dir $WORK/other name different directories" \
    pretrain --resume "$WORK/empty" --run-dir "$WORK/other"
}

case_distill_existing_study() {
  study_run
  expect_error "$WORK/study already holds a study|--resume $WORK/study" \
    distill --run-dir "$WORK/study"
  check_unchanged "$WORK/study"
}

# ---- an unwritable run directory (a regular file in the way stops root as well) ----

case_pretrain_unwritable() {
  echo "not a directory" > "$WORK/file"
  remember "$WORK"
  expect_error "cannot create run directory $WORK/file/run" \
    pretrain --run-dir "$WORK/file/run"
  expect_error "cannot create run directory $WORK/file" \
    pretrain --run-dir "$WORK/file"
  check_unchanged "$WORK"
}

case_distill_unwritable() {
  echo "not a directory" > "$WORK/file"
  expect_error "cannot create run directory $WORK/file/study" \
    distill --run-dir "$WORK/file/study"
  [ "$(cat "$WORK/file")" = "not a directory" ] || fail "$WORK/file was changed"
  [ ! -e "$WORK/cache" ] || fail "the cache directory was created"
}

run_case
