# Nothing lost, nothing stale, nothing silent, end to end: --out models are not replaced, an
# empty validation split reports no loss, the tokenized corpus follows the corpus's content,
# hand-made checkpoint copies are left alone, '--run-dir .' and failed starts leave no debris, a
# run killed before its first checkpoint starts over, output paths and absurd plans are refused
# naming the option, and options that would be ignored are refused or reported.
# Usage: sh recovery.sh COTAN CASE
. "$(dirname "$0")/common.sh"

FIXTURES=$(cd "$(dirname "$0")/../tokenizer/fixtures" && pwd)
COTAN=$(cd "$(dirname "$COTAN")" && pwd)/$(basename "$COTAN")  # absolute: a case runs from another directory

# One document of about 2,000 bytes (no '%' lines: a text file of one document).
make_one_document() {  # FILE
  i=0
  while [ $i -lt 40 ]; do
    printf 'Line %d of the only document: the quick brown fox jumps over the lazy dog.\n' $i
    i=$((i + 1))
  done > "$1"
}

case_pretrain_out_existing_model() {
  pretrain --run-dir "$WORK/run1" --out "$WORK/model" > /dev/null 2>&1 || fail "the first run failed"
  remember "$WORK/model"
  expect_error "[pretrain] --out $WORK/model already holds a model (checksums.json, config.json, generation_config.json and 3 more): pass --overwrite to move it aside, or choose another --out" \
    pretrain --run-dir "$WORK/run2" --out "$WORK/model"
  check_unchanged "$WORK/model"
  [ ! -e "$WORK/run2" ] || fail "the refused run trained: $(ls -A "$WORK/run2")"
  # A sharded model: refused as well, its index and shards left as they are.
  mkdir "$WORK/sharded"
  echo '{"weight_map": {}}' > "$WORK/sharded/model.safetensors.index.json"
  echo shard > "$WORK/sharded/model-00001-of-00002.safetensors"
  echo shard > "$WORK/sharded/model-00002-of-00002.safetensors"
  remember "$WORK/sharded"
  expect_error "--out $WORK/sharded already holds a model (model-00001-of-00002.safetensors, model-00002-of-00002.safetensors, model.safetensors.index.json)" \
    pretrain --run-dir "$WORK/run3" --out "$WORK/sharded"
  check_unchanged "$WORK/sharded"
  # Resuming cannot move it aside.
  pretrain --run-dir "$WORK/part" --steps 4 --stop-after 2 > /dev/null 2>&1 || fail "the first part failed"
  expect_error "--out $WORK/model already holds a model|choose another --out (--overwrite, which moves it aside, does not go with --resume)" \
    pretrain --resume "$WORK/part" --steps 4 --out "$WORK/model"
  check_unchanged "$WORK/model"
  # A file in the way.
  echo "not a directory" > "$WORK/file"
  expect_error "[pretrain] --out $WORK/file: a file of that name is in the way (--out names a directory)" \
    pretrain --run-dir "$WORK/run4" --out "$WORK/file"
  # --overwrite moves the old model aside, whole, once the new one is trained.
  pretrain --run-dir "$WORK/run5" --out "$WORK/model" --overwrite > /dev/null 2> "$STDERR" ||
    fail "--overwrite failed: $(cat "$STDERR")"
  grep -qF "moved the earlier contents of --out $WORK/model to $WORK/model.old-1" "$STDERR" || fail "no message: $(cat "$STDERR")"
  snapshot "$WORK/model.old-1" | cmp -s - "$SNAPSHOTS/$(echo "$WORK/model" | cksum | cut -d' ' -f1)" ||
    fail "$WORK/model.old-1 is not the old model"
  [ "$(ls "$WORK/model")" = "$(printf 'checksums.json\nconfig.json\ngeneration_config.json\nmodel.safetensors\ntokenizer.json\ntokenizer_config.json')" ] ||
    fail "the new model is not alone in $WORK/model: $(ls "$WORK/model")"
}

case_single_document_validation() {
  make_one_document "$WORK/one.txt"
  pretrain --data "$WORK/one.txt" --run-dir "$WORK/run" > "$STDOUT" 2> "$STDERR" || fail "pretrain failed: $(cat "$STDERR")"
  grep -qF "note: no validation batches (the validation split holds 0 tokens; a window takes seq_len + 1 = 17): the run reports no validation loss" \
    "$STDERR" || fail "no note: $(cat "$STDERR")"
  ! grep -q "validation perplexity" "$STDOUT" || fail "a validation perplexity was printed: $(cat "$STDOUT")"
  ! grep -q '"eval"' "$WORK/run/metrics.jsonl" || fail "metrics.jsonl holds an evaluation"
  # A single token shard: the same.
  "$COTAN" tokenize "$WORK/one.txt" --out "$WORK/shards" > /dev/null 2>&1 || fail "tokenize failed"
  pretrain --data "$WORK/shards/train-00000.tok" --run-dir "$WORK/run-tok" > "$STDOUT" 2> "$STDERR" ||
    fail "pretrain on one shard failed: $(cat "$STDERR")"
  grep -qF "note: no validation batches" "$STDERR" || fail "no note: $(cat "$STDERR")"
  ! grep -q '"eval"' "$WORK/run-tok/metrics.jsonl" || fail "metrics.jsonl holds an evaluation"
  # The study's table says the perplexity was not measured.
  distill --data "$WORK/one.txt" --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" || fail "distill failed: $(cat "$STDERR")"
  row=$(grep '^| softmax ' "$WORK/study/table.md")
  [ "$(echo "$row" | cut -d'|' -f5 | tr -d ' ')" = "n/a" ] || fail "val ppl is not n/a: $row"
  grep -qF -- "- n/a: not measured" "$WORK/study/table.md" || fail "the legend does not say what n/a is"
}

case_token_cache_content() {
  make_config "$WORK/hf.json" softmax 4505  # the qwen2 fixture tokenizer's 4505 ids
  make_one_document "$WORK/corpus.txt"
  train() {
    pretrain --config "$WORK/hf.json" --tokenizer "$FIXTURES/qwen2" --data "$WORK/corpus.txt" --cache-dir "$WORK/cache" \
      --run-dir "$WORK/$1" --steps 1 > /dev/null 2> "$STDERR" || fail "pretrain failed: $(cat "$STDERR")"
  }
  train run1
  grep -qF "data: tokenizing $WORK/corpus.txt" "$STDERR" || fail "not tokenized: $(cat "$STDERR")"
  train run2
  grep -qF "data: reusing" "$STDERR" || fail "the cache was not reused: $(cat "$STDERR")"
  # Rewritten in place: the same size and modification time, other bytes.
  touch -r "$WORK/corpus.txt" "$WORK/stamp"
  sed 's/fox/cat/' "$WORK/corpus.txt" > "$WORK/rewritten"
  cat "$WORK/rewritten" > "$WORK/corpus.txt"
  touch -r "$WORK/stamp" "$WORK/corpus.txt"
  train run3
  grep -qF "data: tokenizing $WORK/corpus.txt" "$STDERR" || fail "the stale tokens were reused: $(cat "$STDERR")"
  [ "$(ls "$WORK/cache/tokens" | wc -l)" -eq 2 ] || fail "not two cache entries: $(ls "$WORK/cache/tokens")"
}

# A resumed run needs no more disk than an uninterrupted one: on a tmpfs with room for two
# checkpoints and a half (a run with --keep-checkpoints 1 holds two while it writes the next), both
# finish. The checkpoint a run resumed from must not stay mapped once pruning deletes it. Needs a
# mount namespace (unshare -rm); skipped without one.
case_resumed_run_disk_space() {
  if ! unshare -rm true 2> /dev/null; then
    echo "SKIP $CASE: no mount namespace (unshare -rm) for a small tmpfs"
    exit 77
  fi
  unshare -rm sh "$0" "$COTAN" disk_space_in_tmpfs || failures=$((failures + 1))
}

case_disk_space_in_tmpfs() {
  printf '%s\n' '{"model_type": "llama", "vocab_size": 257, "hidden_size": 64, "num_hidden_layers": 2,' \
    '"num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 128}' > "$WORK/wide.json"
  pretrain --config "$WORK/wide.json" --steps 1 --run-dir "$WORK/sizing" > /dev/null 2>&1 || fail "the sizing run failed"
  kib=$(du -sk "$WORK/sizing/checkpoint" | cut -f1)
  mkdir "$WORK/small"
  mount -t tmpfs -o size=$((kib * 5 / 2 + 64))k tmpfs "$WORK/small" || { fail "cannot mount a tmpfs"; return; }
  train_small() {
    pretrain --config "$WORK/wide.json" --steps 6 --checkpoint-every 1 --keep-checkpoints 1 "$@" > /dev/null 2> "$STDERR"
  }
  train_small --run-dir "$WORK/small/whole" || fail "the uninterrupted run failed: $(tail -n 1 "$STDERR")"
  deterministic_metrics "$WORK/small/whole/metrics.jsonl" > "$ROOT/whole"
  rm -rf "$WORK/small/whole"
  train_small --run-dir "$WORK/small/run" --stop-after 2 || fail "the first part failed: $(tail -n 1 "$STDERR")"
  train_small --resume "$WORK/small/run" || fail "the resumed run failed: $(tail -n 1 "$STDERR")"
  deterministic_metrics "$WORK/small/run/metrics.jsonl" | cmp -s - "$ROOT/whole" || fail "the resumed run differs"
  umount "$WORK/small"
}

case_hand_made_checkpoint() {
  pretrain --steps 6 --checkpoint-every 1 --stop-after 3 --run-dir "$WORK/run" > /dev/null 2>&1 || fail "the first part failed"
  cp -r "$WORK/run/checkpoint" "$WORK/run/checkpoint-999"  # a backup, by hand
  remember "$WORK/run/checkpoint-999"
  pretrain --steps 6 --checkpoint-every 1 --resume "$WORK/run" > /dev/null 2> "$STDERR" || fail "resume failed: $(cat "$STDERR")"
  grep -qxF "note: $WORK/run/checkpoint-999 is not a checkpoint this run wrote (its trainer.json records step 3): it is left alone, never resumed from nor removed" \
    "$STDERR" || fail "no note: $(cat "$STDERR")"
  check_unchanged "$WORK/run/checkpoint-999"
  [ "$(checkpoint_step "$WORK/run/checkpoint-5")" = 5 ] || fail "the run's previous checkpoint was pruned: $(ls "$WORK/run")"
  [ "$(checkpoint_step "$WORK/run/checkpoint")" = 6 ] || fail "no checkpoint of step 6"
}

case_run_dir_dot_overwrite() {
  pretrain --run-dir "$WORK/here" > /dev/null 2>&1 || fail "the first run failed"
  remember "$WORK/here"
  (cd "$WORK/here" && pretrain --run-dir . --overwrite > /dev/null 2> "$STDERR") || fail "--run-dir . --overwrite failed: $(cat "$STDERR")"
  grep -qxF "moved the earlier run in . to $WORK/here.old-1" "$STDERR" || fail "no clear message: $(cat "$STDERR")"
  snapshot "$WORK/here.old-1" | cmp -s - "$SNAPSHOTS/$(echo "$WORK/here" | cksum | cut -d' ' -f1)" ||
    fail "$WORK/here.old-1 is not the old run"
  [ "$(ls -A "$WORK/here")" = "$(printf 'checkpoint\nmetrics.jsonl')" ] || fail "debris in $WORK/here: $(ls -A "$WORK/here")"
  [ "$(ls -A "$WORK")" = "$(printf 'corpus\nhere\nhere.old-1\ntiny.json')" ] || fail "debris in $WORK: $(ls -A "$WORK")"
  # A failed start in a directory of the user's leaves no lock file behind.
  mkdir "$WORK/mine"
  echo notes > "$WORK/mine/notes.txt"
  expect_error "[train] $WORK/mine already holds files (notes.txt): pass --overwrite to move them aside, or choose another --run-dir" \
    pretrain --run-dir "$WORK/mine"
  [ "$(ls -A "$WORK/mine")" = notes.txt ] || fail "debris in $WORK/mine: $(ls -A "$WORK/mine")"
  expect_error "seq_len 4096 is above" pretrain --run-dir "$WORK/mine" --seq-len 4096
  [ "$(ls -A "$WORK/mine")" = notes.txt ] || fail "debris in $WORK/mine: $(ls -A "$WORK/mine")"
}

case_killed_before_checkpoint() {
  pretrain --steps 4 --run-dir "$WORK/whole" > /dev/null 2>&1 || fail "the whole run failed"
  # What a run killed before its first checkpoint leaves: its first steps' metrics and its lock.
  killed() {
    rm -rf "$WORK/run"
    mkdir "$WORK/run"
    head -n 2 "$WORK/whole/metrics.jsonl" > "$WORK/run/metrics.jsonl"
    printf '999999\ncotan pretrain\n' > "$WORK/run/.lock"
  }
  message="starting over in $WORK/run: the run there stopped before its first checkpoint (removing metrics.jsonl)"
  killed
  pretrain --steps 4 --resume "$WORK/run" > /dev/null 2> "$STDERR" || fail "--resume failed: $(cat "$STDERR")"
  grep -qxF "$message" "$STDERR" || fail "no message: $(cat "$STDERR")"
  deterministic_metrics "$WORK/whole/metrics.jsonl" > "$ROOT/whole"
  deterministic_metrics "$WORK/run/metrics.jsonl" | cmp -s - "$ROOT/whole" || fail "the resumed run differs from the whole run"
  killed
  pretrain --steps 4 --run-dir "$WORK/run" > /dev/null 2> "$STDERR" || fail "the plain rerun failed: $(cat "$STDERR")"
  grep -qxF "$message" "$STDERR" || fail "no message: $(cat "$STDERR")"
  deterministic_metrics "$WORK/run/metrics.jsonl" | cmp -s - "$ROOT/whole" || fail "the rerun differs from the whole run"
  [ "$(ls -A "$WORK/run")" = "$(printf 'checkpoint\nmetrics.jsonl')" ] || fail "debris in $WORK/run: $(ls -A "$WORK/run")"
}

case_output_paths() {
  pretrain --steps 2 --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > /dev/null 2>&1 || fail "the teacher's run failed"
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" > /dev/null 2>&1 || fail "tokenize failed"
  echo "not a directory" > "$WORK/file"
  remember "$WORK"
  expect_error "[teacher-logits] --out $WORK/file: a file of that name is in the way (--out names a directory)" \
    "$COTAN" teacher-logits --teacher "$WORK/teacher" --data "$WORK/shards" --top-k 4 --seq-len 16 --out "$WORK/file"
  expect_error "[teacher-logits] --out $WORK/file/topk: a file is in the way on its path (--out names a directory)" \
    "$COTAN" teacher-logits --teacher "$WORK/teacher" --data "$WORK/shards" --top-k 4 --seq-len 16 --out "$WORK/file/topk"
  expect_error "[tokenize] --out $WORK/file: a file of that name is in the way (--out names a directory)" \
    "$COTAN" tokenize "$WORK/corpus" --out "$WORK/file"
  # Checked before anything trains: the cache keeps the teacher's weights and tokenized corpora.
  expect_error "[distill] --cache-dir $WORK/file: a file of that name is in the way (--cache-dir names a directory)" \
    distill --cache-dir "$WORK/file" --run-dir "$WORK/study"
  expect_error "[pretrain] --cache-dir $WORK/file/cache: a file is in the way on its path (--cache-dir names a directory)" \
    pretrain --cache-dir "$WORK/file/cache" --run-dir "$WORK/run"
  expect_error "[generate] --prompt-file $WORK/shards: a directory, not a file of prompts" \
    "$COTAN" generate --model "$WORK/teacher" --prompt-file "$WORK/shards"
  check_unchanged "$WORK"
}

case_plan_absurd_sizes() {
  plan() { "$COTAN" plan --student "$WORK/tiny.json" --teacher "$WORK/tiny.json" --attention softmax "$@"; }
  expect_error "[option] --gpu-memory 1e30TiB: above 1 PiB, more than any GPU holds" plan --gpu-memory 1e30TiB
  expect_error "[plan] --seq-len 4096 is above the student's max_position_embeddings 2048 (pass --allow-longer-context" \
    plan --seq-len 4096
  # A global batch of two primes near 2^20 whose largest fitting micro-batch is far above both:
  # answered at once (the divisor search takes square-root time, not a loop over the batch).
  timeout 20 "$COTAN" plan --student "$WORK/tiny.json" --teacher "$WORK/tiny.json" --attention softmax \
    --batch-size 1048573 --grad-accum 1048571 --seq-len 1 --gpu-memory 100TiB --json > "$STDOUT" 2> "$STDERR" ||
    fail "plan failed or hung: $(cat "$STDERR")"
  grep -q '"largest_exact_micro_batch": 1048573,' "$STDOUT" || fail "not the largest divisor: $(cat "$STDOUT")"
  grep -q '"largest_micro_batch": [1-9]' "$STDOUT" || fail "no micro-batch fits: $(cat "$STDOUT")"
  ! grep -q -- '-[0-9]' "$STDOUT" || fail "a negative number (an overflow): $(grep -- '-[0-9]' "$STDOUT")"
  expect_error "[plan] the tokens of a step, global batch x --seq-len" \
    plan --batch-size 1048576 --grad-accum 1048576 --seq-len 16777216 --allow-longer-context
}

case_ignored_options() {
  pretrain --steps 2 --run-dir "$WORK/run" --out "$WORK/model" > /dev/null 2>&1 || fail "the model's run failed"
  for option in "--temperature 0.5" "--top-k 5" "--top-p 0.9" "--seed 3"; do
    set -- $option
    expect_error "[option] --greedy and $1 exclude each other: greedy decoding takes the most likely token, and would ignore $1" \
      "$COTAN" generate --model "$WORK/model" --prompt "Doc" --greedy "$@"
  done
  expect_error "[option] --stop-after 50 is above --steps 10: the run ends at step 10 anyway" \
    pretrain --steps 10 --stop-after 50 --run-dir "$WORK/stop"
  [ ! -e "$WORK/stop" ] || fail "the refused run wrote $WORK/stop"
  # --warmup above what fits before the decay: one line says what the warmup is.
  pretrain --steps 10 --warmup 50 --run-dir "$WORK/warm" > /dev/null 2> "$STDERR" || fail "pretrain failed: $(cat "$STDERR")"
  grep -qxF "note: --warmup 50 is longer than the steps before the decay (--steps, --decay-fraction): the warmup is the run's 8 steps" \
    "$STDERR" || fail "no note: $(cat "$STDERR")"
  distill --steps 10 --teacher-steps 20 --warmup 50 --run-dir "$WORK/study" > /dev/null 2> "$STDERR" ||
    fail "distill failed: $(cat "$STDERR")"
  grep -qxF "note: --warmup 50 is longer than the steps before the decay (--steps, --decay-fraction): the warmup is the students' 8, the teacher's 16 steps" \
    "$STDERR" || fail "no note: $(cat "$STDERR")"
  # --teacher beside --teacher-logits: one line says the targets stand in for it.
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" > /dev/null 2>&1 || fail "tokenize failed"
  "$COTAN" teacher-logits --teacher "$WORK/model" --data "$WORK/shards" --top-k 4 --seq-len 16 --out "$WORK/topk" \
    > /dev/null 2> "$STDERR" || fail "teacher-logits failed: $(cat "$STDERR")"
  distill --teacher-logits "$WORK/topk" --data "$WORK/shards" --run-dir "$WORK/offline" > /dev/null 2> "$STDERR" ||
    fail "distill --teacher-logits failed: $(cat "$STDERR")"
  grep -qxF "note: --teacher-logits $WORK/topk stands in for the teacher: --teacher, --teacher-steps are not used" "$STDERR" ||
    fail "no note: $(cat "$STDERR")"
}

run_case
