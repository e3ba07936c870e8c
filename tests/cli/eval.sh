# `cotan eval`: perplexity and zero-shot tasks on a tiny pretrained model, end to end, and bad input;
# the same evaluation as columns of a tiny study (`cotan distill --eval-ppl --eval-tasks`).
# Usage: sh eval.sh COTAN CASE
. "$(dirname "$0")/common.sh"

SAMPLES=$(dirname "$0")/../eval

make_model() {  # DIR
  pretrain --steps 10 --run-dir "$WORK/run" --out "$1" > /dev/null 2> "$STDERR" || fail "pretrain failed: $(cat "$STDERR")"
}

# Runs `cotan eval ARGS...` with stdout in FILE; fails the case when it fails.
eval_to() {  # FILE ARGS...
  out=$1
  shift
  "$COTAN" eval "$@" > "$out" 2> "$STDERR" || fail "eval $* failed: $(cat "$STDERR")"
}

# Expects `cotan eval ARGS...` to fail with one line on stderr that contains TEXT.
eval_fails() {  # TEXT ARGS...
  text=$1
  shift
  if "$COTAN" eval "$@" > "$STDOUT" 2> "$STDERR"; then
    fail "eval $* succeeded"
  elif [ "$(wc -l < "$STDERR")" -ne 1 ] || ! grep -qF -- "$text" "$STDERR"; then
    fail "eval $*: expected one line with '$text', got: $(cat "$STDERR")"
  fi
}

TASKS="piqa=$SAMPLES/piqa.jsonl,hellaswag=$SAMPLES/hellaswag.jsonl,winogrande=$SAMPLES/winogrande.jsonl"
TASKS="$TASKS,arc_easy=$SAMPLES/arc.jsonl,arc_challenge=$SAMPLES/arc.jsonl,boolq=$SAMPLES/boolq.jsonl"

case_eval_table() {
  make_model "$WORK/model"
  eval_to "$WORK/table" --model "$WORK/model" --ppl-data "$SAMPLES/ppl.txt" --tasks "$TASKS"
  head -n 1 "$WORK/table" | grep -qx '| model | ppl | winogrande | piqa | hellaswag | arc_challenge | arc_easy | boolq | avg |' ||
    fail "unexpected header: $(cat "$WORK/table")"
  sed -n 3p "$WORK/table" | grep -Eq '^\| model \| [0-9]+\.[0-9]{2} (\| [0-9]+\.[0-9] ){7}\|$' ||
    fail "unexpected row: $(cat "$WORK/table")"
  grep -q 'bits per byte' "$STDERR" || fail "no bits per byte on stderr: $(cat "$STDERR")"
  grep -q 'piqa: 3 examples, acc .* examples/s' "$STDERR" || fail "no piqa line on stderr: $(cat "$STDERR")"
  # --json holds the same numbers; --limit cuts each task.
  eval_to "$WORK/json" --model "$WORK/model" --ppl-data "$SAMPLES/ppl.txt" --tasks "$TASKS" --limit 1 --json
  grep -q '"perplexity":{.*"ppl":[0-9]' "$WORK/json" || fail "no perplexity in the JSON: $(cat "$WORK/json")"
  grep -q '"piqa":{[^}]*"examples":1,' "$WORK/json" || fail "--limit 1 is not one example: $(cat "$WORK/json")"
  grep -q '"average":' "$WORK/json" || fail "no average in the JSON: $(cat "$WORK/json")"
  # A JSONL corpus: the same text in a "text" field gives the same perplexity.
  printf '{"text": "%s"}\n' "$(tr '\n' ' ' < "$SAMPLES/ppl.txt" | sed 's/ $//')" > "$WORK/ppl.jsonl"
  tr '\n' ' ' < "$SAMPLES/ppl.txt" | sed 's/ $//' > "$WORK/ppl.txt"
  eval_to "$WORK/a" --model "$WORK/model" --ppl-data "$WORK/ppl.jsonl" --ppl-window 16 --ppl-stride 5 --json
  eval_to "$WORK/b" --model "$WORK/model" --ppl-data "$WORK/ppl.txt" --ppl-window 16 --ppl-stride 5 --json
  sed 's/"file":"[^"]*",//' "$WORK/a" > "$WORK/a.t"
  sed 's/"file":"[^"]*",//' "$WORK/b" > "$WORK/b.t"
  cmp -s "$WORK/a.t" "$WORK/b.t" || fail "JSONL and text perplexity differ: $(cat "$WORK/a.t") vs $(cat "$WORK/b.t")"
  grep -q '"window":16,"stride":5' "$WORK/a" || fail "the window and stride are not reported: $(cat "$WORK/a")"
}

case_eval_bad_input() {
  make_model "$WORK/model"
  printf '{"goal": "g", "sol1": "a", "label": 0}\n' > "$WORK/missing.jsonl"
  eval_fails "missing.jsonl:1: missing field 'sol2'" --model "$WORK/model" --tasks "piqa=$WORK/missing.jsonl"
  printf '\n{"activity_label": "a", "ctx_a": "b", "ctx_b": "c", "endings": [], "label": 0}\n' > "$WORK/empty.jsonl"
  eval_fails "empty.jsonl:2: the choice list is empty" --model "$WORK/model" --tasks "hellaswag=$WORK/empty.jsonl"
  printf '{"passage": "p", "question": "q", "answer": true}\n' > "$WORK/ok.jsonl"
  printf '{"goal": "g", "sol1": "a", "sol2": "b", "label": 5}\n' > "$WORK/range.jsonl"
  eval_fails "range.jsonl:1: label 5 (field 'label') is out of range for 2 choices" --model "$WORK/model" \
    --tasks "boolq=$WORK/ok.jsonl,piqa=$WORK/range.jsonl"
  printf '{"sentence": "a _ b", "option1": "x", "option2": "y", "answer": "3"}\n' > "$WORK/answer.jsonl"
  eval_fails 'answer.jsonl:1: answer "3" is out of range' --model "$WORK/model" --tasks "winogrande=$WORK/answer.jsonl"
  eval_fails "unknown task 'squad' (known: winogrande, piqa" --model "$WORK/model" --tasks "squad=$WORK/ok.jsonl"
  eval_fails "--tasks: 'piqa' is not NAME=FILE" --model "$WORK/model" --tasks piqa
  eval_fails "nothing to evaluate" --model "$WORK/model"
  eval_fails "cannot open" --model "$WORK/model" --tasks "piqa=$WORK/nosuch.jsonl"
  # A model whose vocabulary is not the byte tokenizer's, without a tokenizer.json (pretrain --out
  # writes the byte tokenizer's: removed here).
  make_config "$WORK/wide.json" softmax 300
  pretrain --config "$WORK/wide.json" --steps 2 --run-dir "$WORK/run-wide" --out "$WORK/wide" > /dev/null 2> "$STDERR" ||
    fail "pretrain failed: $(cat "$STDERR")"
  rm "$WORK/wide/tokenizer.json"
  eval_fails "has no tokenizer.json, and its vocab_size 300 is not the byte tokenizer's 257" --model "$WORK/wide" \
    --ppl-data "$SAMPLES/ppl.txt"
  eval_fails "[eval]" --model "$WORK/wide" --tasks "boolq=$WORK/ok.jsonl"
}

# Perplexity of a text file: one token stream by default (HF's guide: the file's bytes, no
# end-of-sequence token), or its documents each ending in one (--ppl-mode documents); the mode
# that ran is said on stderr and in the JSON.
case_eval_ppl_modes() {
  make_model "$WORK/model"
  bytes=$(wc -c < "$SAMPLES/ppl.txt")
  eval_to "$WORK/stream" --model "$WORK/model" --ppl-data "$SAMPLES/ppl.txt" --json
  grep -q 'as one token stream (HF.s perplexity guide)' "$STDERR" || fail "the stream mode is not said: $(cat "$STDERR")"
  grep -q "\"mode\":\"stream\",.*\"tokens\":$((bytes - 1)),\"bytes\":$bytes," "$WORK/stream" ||
    fail "the stream is not the file's $bytes bytes: $(cat "$WORK/stream")"
  eval_to "$WORK/docs" --model "$WORK/model" --ppl-data "$SAMPLES/ppl.txt" --ppl-mode documents --json
  grep -q '1 documents, each ending in the end-of-sequence token' "$STDERR" || fail "the documents mode is not said: $(cat "$STDERR")"
  grep -q "\"mode\":\"documents\",.*\"tokens\":$bytes," "$WORK/docs" ||
    fail "the document is not followed by its end-of-sequence token: $(cat "$WORK/docs")"
  eval_fails "--ppl-mode lines: expected stream or documents" --model "$WORK/model" --ppl-data "$SAMPLES/ppl.txt" \
    --ppl-mode lines
}

# The cells of column NAME of a CSV file's rows after the header, one a line.
csv_column() {  # FILE NAME
  awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) col = i; next }
    col { print $col } END { if (!col) print "no column " name }' "$1"
}

case_distill_eval() {
  # Every variant (an empty --attention), two seeds: the students' cells are mean ± std.
  distill --attention "" --seeds 2 --run-dir "$WORK/study" --eval-ppl "$SAMPLES/ppl.txt" \
    --eval-tasks "piqa=$SAMPLES/piqa.jsonl,boolq=$SAMPLES/boolq.jsonl" --eval-limit 2 > "$STDOUT" 2> "$STDERR" ||
    fail "the study failed: $(cat "$STDERR")"
  head -n 1 "$WORK/study/table.md" | grep -Eq '\| +eval ppl +\| +piqa acc +\| +boolq acc +\| +task avg +\|$' ||
    fail "no evaluation columns in table.md: $(head -n 1 "$WORK/study/table.md")"
  # A row per student with four mean ± std cells at the end, and the teacher's reference row.
  [ "$(grep -Ec '([0-9.e+-]+ ± [0-9.e+-]+ *\| *){4}$' "$WORK/study/table.md")" -eq 6 ] ||
    fail "not six students with evaluation cells: $(cat "$WORK/study/table.md")"
  grep -Eq '^\| teacher +\|[ |]+ [0-9.]+ +\| +[0-9.]+ +\| +[0-9.]+ +\| +[0-9.]+ +\|$' "$WORK/study/table.md" ||
    fail "no teacher row in table.md: $(cat "$WORK/study/table.md")"
  grep -q 'piqa acc: zero-shot accuracy (acc) in percent on the first 2 examples of' "$WORK/study/table.md" ||
    fail "no legend for piqa acc: $(cat "$WORK/study/table.md")"
  for column in "eval ppl mean" "eval ppl std" "piqa acc mean" "boolq acc mean" "task avg mean" "task avg std"; do
    cells=$(csv_column "$WORK/study/table.csv" "$column")
    [ "$(echo "$cells" | grep -Ecx '[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?')" -eq 7 ] ||
      fail "column '$column' of table.csv is not seven numbers: $cells"
  done
  # Accuracies are percentages of 2 examples; perplexity is above 1.
  csv_column "$WORK/study/table.csv" "piqa acc mean" | awk '$1 < 0 || $1 > 100 { bad = 1 } END { exit bad }' ||
    fail "piqa accuracy outside [0, 100]: $(csv_column "$WORK/study/table.csv" "piqa acc mean")"
  csv_column "$WORK/study/table.csv" "eval ppl mean" | awk '$1 <= 1 { bad = 1 } END { exit bad }' ||
    fail "perplexity not above 1: $(csv_column "$WORK/study/table.csv" "eval ppl mean")"
  grep -q '^affine(linear_clip) vs softmax: .*; eval ppl [+-][0-9.]*% .*; task avg ' "$WORK/study/verdicts.txt" ||
    fail "no evaluation in the verdicts: $(cat "$WORK/study/verdicts.txt")"
  grep -q '"eval": {' "$WORK/study/study.json" || fail "study.json does not record the evaluation"
  # Resuming checks the evaluation's options.
  remember "$WORK/study"
  expect_error "cannot resume|another config" \
    distill --attention "" --seeds 2 --resume "$WORK/study" --eval-ppl "$SAMPLES/ppl.txt" \
    --eval-tasks "piqa=$SAMPLES/piqa.jsonl,boolq=$SAMPLES/boolq.jsonl" --eval-limit 1
  check_unchanged "$WORK/study"
}

case_distill_eval_bad_input() {
  expect_error "[distill] --eval-tasks: unknown task 'squad' (known: winogrande, piqa" \
    distill --run-dir "$WORK/study" --eval-tasks "piqa=$SAMPLES/piqa.jsonl,squad=$SAMPLES/piqa.jsonl"
  expect_error "--eval-tasks: 'piqa' is not NAME=FILE" distill --run-dir "$WORK/study" --eval-tasks piqa
  expect_error "--eval-tasks: piqa is given twice" \
    distill --run-dir "$WORK/study" --eval-tasks "piqa=$SAMPLES/piqa.jsonl,piqa=$SAMPLES/piqa.jsonl"
  expect_error "--eval-limit needs --eval-tasks" distill --run-dir "$WORK/study" --eval-limit 3
  printf '{"goal": "g", "sol1": "a", "label": 0}\n' > "$WORK/missing.jsonl"
  expect_error "missing.jsonl:1: missing field 'sol2'" \
    distill --run-dir "$WORK/study" --eval-tasks "boolq=$SAMPLES/boolq.jsonl,piqa=$WORK/missing.jsonl"
  expect_error "--eval-ppl $WORK/nosuch.txt: no such file" distill --run-dir "$WORK/study" --eval-ppl "$WORK/nosuch.txt"
  : > "$WORK/empty.txt"
  expect_error "$WORK/empty.txt: the corpus is empty" distill --run-dir "$WORK/study" --eval-ppl "$WORK/empty.txt"
  [ ! -e "$WORK/study" ] || fail "a failed study wrote $WORK/study"
}

run_case
