# `cotan generate`: text from a tiny pretrained model, the KV cache against full recomputation
# (the hidden --no-cache), deterministic sampling, batched prompt files and bad input.
# Usage: sh generate.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# A tiny model of attention KIND pretrained for a few steps, saved as the model directory DIR.
make_model() {  # DIR [KIND]
  make_config "$WORK/$2.json" "${2:-softmax}"
  pretrain --config "$WORK/$2.json" --steps 10 --run-dir "$WORK/run-$2" --out "$1" > /dev/null 2> "$STDERR" ||
    fail "pretrain failed: $(cat "$STDERR")"
}

# Runs `cotan generate ARGS...` with stdout in FILE; fails the case when it fails.
generate_to() {  # FILE ARGS...
  out=$1
  shift
  "$COTAN" generate "$@" > "$out" 2> "$STDERR" || fail "generate $* failed: $(cat "$STDERR")"
}

case_generate_greedy() {
  make_model "$WORK/model" softmax
  generate_to "$WORK/a" --model "$WORK/model" --prompt "Document 1" --greedy --max-new-tokens 24
  generate_to "$WORK/b" --model "$WORK/model" --prompt "Document 1" --greedy --max-new-tokens 24
  generate_to "$WORK/full" --model "$WORK/model" --prompt "Document 1" --greedy --max-new-tokens 24 --no-cache
  grep -q '^Document 1' "$WORK/a" || fail "the output does not start with the prompt: $(cat "$WORK/a")"
  cmp -s "$WORK/a" "$WORK/b" || fail "greedy generation differs between two runs"
  cmp -s "$WORK/a" "$WORK/full" || fail "the KV cache gives $(cat "$WORK/a"), full recomputation $(cat "$WORK/full")"
  grep -q "tokens/s on cpu" "$STDERR" || fail "no tokens/s on stderr: $(cat "$STDERR")"
  generate_to "$WORK/json" --model "$WORK/model" --prompt "Document 1" --greedy --max-new-tokens 24 --json
  grep -q '^{"prompt":"Document 1","completion":".*","prompt_tokens":10,"tokens":\[[0-9]' "$WORK/json" ||
    fail "unexpected JSON: $(cat "$WORK/json")"
  grep -q '"finish":"\(length\|eos\)","tokens_per_s":' "$WORK/json" || fail "no finish or tokens_per_s: $(cat "$WORK/json")"
}

# Every kind but softmax: the cached decode of its attention equals full recomputation, end to end.
case_generate_kinds() {
  for kind in sink affine gated affine_gated; do
    make_model "$WORK/$kind" $kind
    generate_to "$WORK/$kind.cached" --model "$WORK/$kind" --prompt "Document" --max-new-tokens 16 --seed 5
    generate_to "$WORK/$kind.full" --model "$WORK/$kind" --prompt "Document" --max-new-tokens 16 --seed 5 --no-cache
    cmp -s "$WORK/$kind.cached" "$WORK/$kind.full" ||
      fail "$kind: the KV cache gives $(cat "$WORK/$kind.cached"), full recomputation $(cat "$WORK/$kind.full")"
  done
}

case_generate_sampling_seed() {
  make_model "$WORK/model" affine
  for run in 1a 1b 2; do
    generate_to "$WORK/seed$run" --model "$WORK/model" --prompt "The" --max-new-tokens 40 --seed "${run%[ab]}" \
      --temperature 1.5 --top-k 50 --top-p 0.95
  done
  cmp -s "$WORK/seed1a" "$WORK/seed1b" || fail "the same seed gives different text"
  cmp -s "$WORK/seed1a" "$WORK/seed2" && fail "seeds 1 and 2 give the same 40 sampled tokens"
  # Stop text: the completion ends before it.
  generate_to "$WORK/stop" --model "$WORK/model" --prompt "The" --max-new-tokens 40 --seed 1 --temperature 1.5 \
    --top-k 50 --top-p 0.95 --stop "e" --json
  grep -q '"completion":"[^e"]*","' "$WORK/stop" || fail "the completion holds the stop text: $(cat "$WORK/stop")"
}

# A prompt file is one ragged batch: the cache pads its rows and masks the padding.
case_generate_prompt_file() {
  make_model "$WORK/model" affine
  printf 'Document 3\n\nA\nthe quick brown fox\r\n' > "$WORK/prompts"
  generate_to "$WORK/cached" --model "$WORK/model" --prompt-file "$WORK/prompts" --max-new-tokens 12 --seed 3 --json
  generate_to "$WORK/full" --model "$WORK/model" --prompt-file "$WORK/prompts" --max-new-tokens 12 --seed 3 --json --no-cache
  [ "$(wc -l < "$WORK/cached")" -eq 3 ] || fail "not one line per non-empty prompt: $(cat "$WORK/cached")"
  sed 's/,"tokens_per_s":[^}]*//' "$WORK/cached" > "$WORK/cached.t"
  sed 's/,"tokens_per_s":[^}]*//' "$WORK/full" > "$WORK/full.t"
  cmp -s "$WORK/cached.t" "$WORK/full.t" || fail "the batched cache differs from recomputation: $(cat "$WORK/cached.t")"
  grep -q '"prompt":"the quick brown fox"' "$WORK/cached" || fail "the carriage return was kept: $(cat "$WORK/cached")"
  # stdin: all of it is one prompt.
  printf 'Document 3\n' | "$COTAN" generate --model "$WORK/model" --greedy --max-new-tokens 4 --json > "$STDOUT" 2> "$STDERR" ||
    fail "generate from stdin failed: $(cat "$STDERR")"
  grep -q '^{"prompt":"Document 3",' "$STDOUT" || fail "stdin is not the prompt: $(cat "$STDOUT")"
}

# Through the SIMT emulator: cuda:0's decode equals its own full recomputation.
case_generate_emulated() {
  make_model "$WORK/model" affine_gated
  COTAN_CUDA_EMULATOR=1 generate_to "$WORK/cached" --model "$WORK/model" --prompt "Document" --greedy --max-new-tokens 8 --device cuda
  COTAN_CUDA_EMULATOR=1 generate_to "$WORK/full" --model "$WORK/model" --prompt "Document" --greedy --max-new-tokens 8 --device cuda --no-cache
  cmp -s "$WORK/cached" "$WORK/full" || fail "cuda:0 (emulated): $(cat "$WORK/cached") against $(cat "$WORK/full")"
  grep -q "on cuda:0" "$STDERR" || fail "not run on cuda:0: $(cat "$STDERR")"
}

# A model directory with an HF tokenizer.json (pretrain --tokenizer copies it into --out): the
# prompt is encoded with it and the completion decoded with it.
case_generate_hf_tokenizer() {
  fixtures=$(cd "$(dirname "$0")/../tokenizer/fixtures" && pwd)
  make_config "$WORK/hf.json" softmax 4505  # the qwen2 fixture's 4505 ids
  pretrain --config "$WORK/hf.json" --tokenizer "$fixtures/qwen2" --steps 4 --run-dir "$WORK/run-hf" --out "$WORK/hf" \
    --cache-dir "$WORK/cache" > /dev/null 2> "$STDERR" || fail "pretrain failed: $(cat "$STDERR")"
  generate_to "$WORK/a" --model "$WORK/hf" --prompt "The fox, café" --greedy --max-new-tokens 12 --json
  # "The fox, café" is 7 ids with the qwen2 fixture (HF: The, Ġfo, x, ",", Ġc, af, Ã©).
  grep -q '^{"prompt":"The fox, café","completion":".*","prompt_tokens":7,' "$WORK/a" ||
    fail "the prompt was not encoded with the model's tokenizer.json: $(cat "$WORK/a")"
  generate_to "$WORK/b" --model "$WORK/hf" --prompt "The fox, café" --greedy --max-new-tokens 12 --json --no-cache
  [ "$(sed 's/,"tokens_per_s":.*//' "$WORK/a")" = "$(sed 's/,"tokens_per_s":.*//' "$WORK/b")" ] ||
    fail "the KV cache and full recomputation differ: $(cat "$WORK/a") $(cat "$WORK/b")"
}

case_generate_bad_input() {
  make_model "$WORK/model" softmax
  expect_error "[generate] --model DIR is required" "$COTAN" generate --prompt x
  expect_error "[generate] prompt 1 tokenizes to nothing|it is empty" "$COTAN" generate --model "$WORK/model" --prompt ""
  mkdir "$WORK/empty"
  cp "$WORK/model/config.json" "$WORK/empty/"
  expect_error "[generate] --model $WORK/empty: no weights" "$COTAN" generate --model "$WORK/empty" --prompt x
  expect_error "--model $WORK/missing: not a directory" "$COTAN" generate --model "$WORK/missing" --prompt x
  expect_error "[option] --max-new-tokens 0: expected an integer in [1," "$COTAN" generate --model "$WORK/model" --max-new-tokens 0
  expect_error "[option] --temperature -1: expected a number in (0, inf)" "$COTAN" generate --model "$WORK/model" --temperature -1
  expect_error "[option] --top-k -2:" "$COTAN" generate --model "$WORK/model" --top-k -2
  expect_error "[option] --top-p 1.5: expected a number in (0, 1] (1: off)" "$COTAN" generate --model "$WORK/model" --top-p 1.5
  expect_error "[option] --seed -1" "$COTAN" generate --model "$WORK/model" --seed -1
  expect_error "[generate] --dtype i64: expected f32, bf16 or f64" "$COTAN" generate --model "$WORK/model" --prompt x --dtype i64
  expect_error "[generate] --prompt and --prompt-file exclude each other" \
    "$COTAN" generate --model "$WORK/model" --prompt x --prompt-file "$WORK/nowhere"
  expect_error "--prompt-file $WORK/nowhere: cannot open" "$COTAN" generate --model "$WORK/model" --prompt-file "$WORK/nowhere"
  : > "$WORK/blank"
  echo > "$WORK/blank"
  expect_error "no prompts (every line is empty)" "$COTAN" generate --model "$WORK/model" --prompt-file "$WORK/blank"
  expect_error "max_position_embeddings" "$COTAN" generate --model "$WORK/model" --prompt x --max-new-tokens 5000
  # A vocabulary that is not the byte tokenizer's, without a tokenizer.json (pretrain --out writes
  # the byte tokenizer's: removed here).
  make_config "$WORK/v300.json" softmax 300
  pretrain --config "$WORK/v300.json" --steps 1 --run-dir "$WORK/run-v300" --out "$WORK/v300" > /dev/null 2>&1
  rm "$WORK/v300/tokenizer.json"
  expect_error "has no tokenizer.json, and its vocab_size 300 is not the byte tokenizer's 257" \
    "$COTAN" generate --model "$WORK/v300" --prompt x
}


# Every student directory a study writes holds its tokenizer's files, and `cotan generate` runs on
# it: a byte-level study's students (the byte tokenizer's tokenizer.json) and the students of a
# study with an HF teacher (the teacher's tokenizer.json, tokenizer_config.json, generation_config.json).
case_generate_study_students() {
  distill --run-dir "$WORK/bytes" --attention softmax,gated > /dev/null 2> "$STDERR" ||
    fail "the byte-level study failed: $(cat "$STDERR")"
  for kind in softmax gated; do
    model=$WORK/bytes/$kind/model
    for f in tokenizer.json tokenizer_config.json generation_config.json; do
      [ -f "$model/$f" ] || fail "$model has no $f"
    done
    grep -q '"eos_token": "<|endoftext|>"' "$model/tokenizer_config.json" ||
      fail "the byte tokenizer's eos is not in $model/tokenizer_config.json: $(cat "$model/tokenizer_config.json")"
    grep -q '"eos_token_id": 256' "$model/config.json" || fail "$model/config.json has no eos_token_id 256"
    generate_to "$WORK/$kind.out" --model "$model" --prompt "The fox" --greedy --max-new-tokens 6 --json
    # The byte tokenizer: 7 ids for the 7 bytes.
    grep -q '^{"prompt":"The fox","completion":".*","prompt_tokens":7,' "$WORK/$kind.out" ||
      fail "the $kind student did not encode with the byte tokenizer: $(cat "$WORK/$kind.out")"
  done
  teacher=$(cd "$(dirname "$0")/../hf/fixtures/llama_with_tokenizer" && pwd)
  make_config "$WORK/v64.json" softmax 64
  distill --teacher "$teacher" --teacher-steps 0 --student "$WORK/v64.json" --run-dir "$WORK/hf" \
    --attention softmax,sink > /dev/null 2> "$STDERR" || fail "the study with an HF teacher failed: $(cat "$STDERR")"
  for kind in softmax sink; do
    model=$WORK/hf/$kind/model
    for f in tokenizer.json tokenizer_config.json; do
      cmp -s "$teacher/$f" "$model/$f" || fail "$model/$f is not the teacher's"
    done
    grep -q '"bos_token_id": 1' "$model/generation_config.json" || fail "$model/generation_config.json: no bos 1"
    grep -q '"eos_token_id": 2' "$model/config.json" || fail "$model/config.json: no eos_token_id 2"
    generate_to "$WORK/hf-$kind.out" --model "$model" --prompt "the cat sat on the mat." --greedy --max-new-tokens 4 --json
    # 14 ids with the fixture's tokenizer, its BOS first (tests/hf/fixtures/llama_with_tokenizer/expected.json).
    grep -q '^{"prompt":"the cat sat on the mat.","completion":".*","prompt_tokens":14,' "$WORK/hf-$kind.out" ||
      fail "the $kind student did not encode with the teacher's tokenizer: $(cat "$WORK/hf-$kind.out")"
  done
}

run_case
