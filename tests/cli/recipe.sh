# Recipes (`cotan distill --recipe`, docs/recipes.md), end to end through the binary.
# Usage: sh recipe.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# A resolved recipe without its comment lines.
settings() {  # FILE
  grep -v '^#' "$1" | grep -v '^$'
}

# The value of KEY in a resolved recipe.
setting() {  # FILE KEY
  sed -n "s/^$2 = //p" "$1"
}

# A recipe for the tiny study of common.sh: 3 steps each on $WORK's corpus.
make_recipe() {  # FILE
  cat > "$1" <<TOML
# A tiny study, for the tests.
teacher = "$WORK/tiny.json"
student = "$WORK/tiny.json"
attention = ["softmax", "affine"]
phi = "linear_clip"
teacher-steps = 3
steps = 3
data = "$WORK/corpus"
seq-len = 16
batch-size = 2
warmup = 0
lr = 3e-3
eval-every = 0
cache-dir = "$WORK/cache"
TOML
}

case_tiny_is_default() {
  "$COTAN" distill --print-recipe > "$ROOT/default" 2> "$STDERR" || fail "--print-recipe failed: $(cat "$STDERR")"
  "$COTAN" distill --recipe tiny --print-recipe > "$ROOT/tiny" 2> "$STDERR" || fail "--recipe tiny failed: $(cat "$STDERR")"
  settings "$ROOT/default" > "$ROOT/a"
  settings "$ROOT/tiny" > "$ROOT/b"
  cmp -s "$ROOT/a" "$ROOT/b" || fail "the tiny recipe is not the default study: $(diff "$ROOT/a" "$ROOT/b" | tr '\n' ' ')"
  [ "$(setting "$ROOT/tiny" steps)" = 150 ] || fail "steps is not 150: $(setting "$ROOT/tiny" steps)"
  [ "$(setting "$ROOT/tiny" lr)" = 0.003 ] || fail "lr is not written as 0.003: $(setting "$ROOT/tiny" lr)"
}

case_paper_recipes() {
  for pair in qwen1.5-0.5b-from-1.8b:qwen1.5-0.5b:qwen1.5-1.8b llama3.2-1b-from-3b:llama3.2-1b:llama3.2-3b \
              llama3.2-3b-from-3.1-8b:llama3.2-3b:llama3.1-8b; do
    name=${pair%%:*}
    rest=${pair#*:}
    "$COTAN" distill --recipe "$name" --print-recipe > "$ROOT/r" 2> "$STDERR" || { fail "$name: $(cat "$STDERR")"; continue; }
    for kv in "student='${rest%%:*}'" "teacher-config='${rest#*:}'" seq-len=2048 batch-size=8 grad-accum=128 steps=9000 \
              lr=0.001 weight-decay=0.1 warmup=100 rho=0.9 "loss='fkl'" temperature=1.0; do
      [ "$(setting "$ROOT/r" "${kv%%=*}")" = "${kv#*=}" ] || fail "$name: ${kv%%=*} is '$(setting "$ROOT/r" "${kv%%=*}")', not ${kv#*=}"
    done
    grep -q "^attention = " "$ROOT/r" && fail "$name does not run every attention kind"
  done
}

case_recipe_precedence() {
  make_recipe "$WORK/r.toml"
  "$COTAN" distill --recipe "$WORK/r.toml" --set steps=5 --set lr=1e-2 --print-recipe > "$ROOT/set" 2> "$STDERR" ||
    fail "--set failed: $(cat "$STDERR")"
  [ "$(setting "$ROOT/set" steps)" = 5 ] && [ "$(setting "$ROOT/set" lr)" = 0.01 ] || fail "--set did not override: $(settings "$ROOT/set" | tr '\n' ' ')"
  [ "$(setting "$ROOT/set" seq-len)" = 16 ] || fail "the recipe's seq-len is lost"
  "$COTAN" distill --recipe "$WORK/r.toml" --set steps=5 --steps 7 --print-recipe > "$ROOT/cli" 2> "$STDERR" ||
    fail "the command line override failed: $(cat "$STDERR")"
  [ "$(setting "$ROOT/cli" steps)" = 7 ] || fail "the command line did not win over --set: steps $(setting "$ROOT/cli" steps)"
  "$COTAN" distill --recipe "$WORK/r.toml" --set composed=true --print-recipe > "$ROOT/sw" 2> "$STDERR" || fail "$(cat "$STDERR")"
  [ "$(setting "$ROOT/sw" composed)" = true ] || fail "--set composed=true did not turn the switch on"
}

case_recipe_bad_input() {
  make_recipe "$WORK/r.toml"
  printf 'setps = 3\n' >> "$WORK/r.toml"
  expect_error "$WORK/r.toml line 15|unknown key 'setps'|did you mean 'steps'" \
    "$COTAN" distill --recipe "$WORK/r.toml" --run-dir "$WORK/run"
  [ ! -e "$WORK/run" ] || fail "a run directory was made for a bad recipe"
  make_recipe "$WORK/r.toml"
  printf 'seeds = 1.5\n' >> "$WORK/r.toml"
  expect_error "'--seeds' is invalid|seeds = 1.5 in $WORK/r.toml line 15" "$COTAN" distill --recipe "$WORK/r.toml"
  make_recipe "$WORK/r.toml"
  printf 'seeds = 0\n' >> "$WORK/r.toml"
  expect_error "--seeds 0|seeds = 0 in $WORK/r.toml line 15" "$COTAN" distill --recipe "$WORK/r.toml"
  printf 'run-dir = "x"\n' > "$WORK/rd.toml"
  expect_error "$WORK/rd.toml line 1|'run-dir' cannot be set by a recipe" "$COTAN" distill --recipe "$WORK/rd.toml"
  printf 'steps = [\n' > "$WORK/broken.toml"
  expect_error "$WORK/broken.toml line" "$COTAN" distill --recipe "$WORK/broken.toml"
  printf '[train]\nsteps = 3\n' > "$WORK/table.toml"
  expect_error "$WORK/table.toml line 1|the value of 'train' is a table" "$COTAN" distill --recipe "$WORK/table.toml"
  expect_error "no recipe 'nosuch'|small, tiny" "$COTAN" distill --recipe nosuch
  expect_error "--set steps: expected KEY=VALUE" "$COTAN" distill --recipe tiny --set steps
  expect_error "--set stpes=3|unknown key 'stpes'" "$COTAN" distill --recipe tiny --set stpes=3
  expect_error "--set steps=3 needs --recipe" "$COTAN" distill --set steps=3
  expect_error "$WORK/missing.toml: no such file" "$COTAN" distill --recipe "$WORK/missing.toml"
}

case_recipe_replay() {
  make_recipe "$WORK/r.toml"
  "$COTAN" distill --recipe "$WORK/r.toml" --run-dir "$WORK/first" > "$STDOUT" 2> "$STDERR" || fail "the study failed: $(cat "$STDERR")"
  [ -s "$WORK/first/recipe.toml" ] || fail "no recipe.toml in the run directory: $(ls "$WORK/first")"
  [ "$(setting "$WORK/first/recipe.toml" attention)" = "'softmax,affine'" ] || fail "attention: $(setting "$WORK/first/recipe.toml" attention)"
  # The run directory names the recipe: --recipe DIR reads DIR/recipe.toml.
  "$COTAN" distill --recipe "$WORK/first" --run-dir "$WORK/second" > "$STDOUT" 2> "$STDERR" || fail "the replay failed: $(cat "$STDERR")"
  settings "$WORK/first/recipe.toml" > "$ROOT/a"
  settings "$WORK/second/recipe.toml" > "$ROOT/b"
  cmp -s "$ROOT/a" "$ROOT/b" || fail "the replay's recipe differs: $(diff "$ROOT/a" "$ROOT/b" | tr '\n' ' ')"
  for run in softmax affine-linear_clip; do
    [ -s "$WORK/first/$run/metrics.jsonl" ] || { fail "no $run run"; continue; }
    deterministic_metrics "$WORK/first/$run/metrics.jsonl" > "$ROOT/a"
    deterministic_metrics "$WORK/second/$run/metrics.jsonl" > "$ROOT/b"
    cmp -s "$ROOT/a" "$ROOT/b" || fail "the replay of $run differs: $(diff "$ROOT/a" "$ROOT/b" | head -2 | tr '\n' ' ')"
  done
  cmp -s "$WORK/first/table.csv" "$WORK/second/table.csv" || fail "the replay's table differs"
}

case_teacher_config() {
  pretrain --steps 1 --run-dir "$WORK/teacher_run" --out "$WORK/teacher" > /dev/null 2>&1 || fail "the teacher's run failed"
  cat > "$WORK/other.json" <<JSON
{"model_type": "llama", "vocab_size": 257, "hidden_size": 16, "num_hidden_layers": 3,
 "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 24}
JSON
  expect_error "--teacher $WORK/teacher is not the model --teacher-config expects|num_hidden_layers" \
    distill --teacher "$WORK/teacher" --teacher-steps 0 --teacher-config "$WORK/other.json" --run-dir "$WORK/bad"
  [ ! -e "$WORK/bad" ] || fail "a run directory was made for the wrong teacher"
  distill --teacher "$WORK/teacher" --teacher-steps 0 --teacher-config "$WORK/tiny.json" --run-dir "$WORK/good" \
    > "$STDOUT" 2> "$STDERR" || fail "the matching teacher was refused: $(cat "$STDERR")"
}

case_plan_paper_recipes() {
  for name in qwen1.5-0.5b-from-1.8b llama3.2-1b-from-3b llama3.2-3b-from-3.1-8b; do
    "$COTAN" plan --recipe "$name" --gpus 8 --gpu-memory 80GiB > "$STDOUT" 2> "$STDERR" || { fail "$name: $(cat "$STDERR")"; continue; }
    for word in "plan: recipe '$name'" "not there: its --teacher-config" "global batch 1024 sequences x 2048 tokens" \
                "8 GPUs x 80.00 GiB" "AdamW moments" "teacher weights (bf16)" "activations" "with --checkpoint-layers" \
                "peak by student: softmax" "affine_gated" "FLOPs per step" "per student (9000 steps)"; do
      grep -qF -- "$word" "$STDOUT" || fail "$name: the plan lacks '$word': $(cat "$STDOUT")"
    done
    grep -Eq "^  peak +[0-9.]+ GiB  (fits|does not fit in 72.00 GiB)$" "$STDOUT" || fail "$name: no peak line: $(cat "$STDOUT")"
    "$COTAN" plan --recipe "$name" --gpus 8 --zero 1 --checkpoint-layers --json > "$STDOUT" 2> "$STDERR" || fail "$name --json: $(cat "$STDERR")"
    for field in '"peak":' '"activations_without_checkpointing":' '"largest_micro_batch":' '"flops_per_step":' '"zero": 1'; do
      grep -qF -- "$field" "$STDOUT" || fail "$name: the JSON lacks $field"
    done
  done
  # The 8B teacher's pair does not fit 80 GB GPUs without sharding or checkpointing; it does with both.
  "$COTAN" plan --recipe llama3.2-3b-from-3.1-8b --gpus 8 --gpu-memory 80GiB > "$STDOUT" 2>&1
  grep -qF "no micro-batch fits without activation checkpointing" "$STDOUT" || fail "the 8B pair fits unsharded: $(cat "$STDOUT")"
  "$COTAN" plan --recipe llama3.2-3b-from-3.1-8b --gpus 8 --gpu-memory 80GiB --zero 1 --checkpoint-layers > "$STDOUT" 2>&1
  grep -qF "largest micro-batch that fits" "$STDOUT" || fail "the 8B pair does not fit with ZeRO-1 and checkpointing: $(cat "$STDOUT")"
}

case_plan_bad_input() {
  expect_error "--gpu-memory 80x|80GiB" "$COTAN" plan --recipe tiny --gpu-memory 80x
  expect_error "--gpus 0" "$COTAN" plan --recipe tiny --gpus 0
  expect_error "--zero 2" "$COTAN" plan --recipe tiny --zero 2
  expect_error "--teacher $WORK/absent|--teacher-config" "$COTAN" plan --teacher "$WORK/absent" --student tiny-student
  printf 'gpus = 4\n' > "$WORK/p.toml"
  expect_error "$WORK/p.toml line 1|unknown key 'gpus'" "$COTAN" distill --recipe "$WORK/p.toml"
  "$COTAN" plan --recipe "$WORK/p.toml" > "$STDOUT" 2> "$STDERR" || fail "plan refused its own key in a recipe: $(cat "$STDERR")"
  grep -qF "4 GPUs" "$STDOUT" || fail "the recipe's gpus = 4 was not used: $(cat "$STDOUT")"
}

run_case
