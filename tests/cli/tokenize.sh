# `cotan tokenize`: shards that `cotan pretrain --data` reads, and bad input.
# Usage: sh tokenize.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# An unsigned little-endian integer of BYTES bytes at OFFSET in FILE.
read_uint() {  # FILE OFFSET BYTES
  od -An -tu"$3" -j"$2" -N"$3" --endian=little "$1" | tr -d ' '
}

FIXTURES=$(cd "$(dirname "$0")/../tokenizer/fixtures" && pwd)

# The header (data.hpp: magic, version 3, dtype, count, largest id, vocabulary, tokenizer hash) and
# the size of one byte-level shard; the count is left in $count.
check_shard() {  # FILE
  [ "$(head -c 8 "$1")" = COTANTOK ] || fail "$1: the magic is not COTANTOK"
  [ "$(read_uint "$1" 8 4)" = 3 ] || fail "$1: version $(read_uint "$1" 8 4), not 3"
  [ "$(read_uint "$1" 12 4)" = 1 ] || fail "$1: dtype $(read_uint "$1" 12 4), not 1 (u16)"
  count=$(read_uint "$1" 16 8)
  # Byte-level documents: every one ends with 256, and no id is larger.
  [ "$count" -eq 0 ] || [ "$(read_uint "$1" 24 4)" = 256 ] || fail "$1: largest id $(read_uint "$1" 24 4), not 256"
  [ "$(read_uint "$1" 28 4)" = 257 ] || fail "$1: vocabulary $(read_uint "$1" 28 4), not the byte tokenizer's 257"
  [ "$(read_uint "$1" 32 8)" != 0 ] || fail "$1: no tokenizer hash"
  [ "$(wc -c < "$1")" -eq $((40 + 2 * count)) ] || fail "$1: $(wc -c < "$1") bytes for $count u16 tokens"
}

# A JSONL corpus of 120 documents with a few bad lines, as FILE.
make_jsonl() {  # FILE
  i=0
  while [ $i -lt 120 ]; do
    printf '{"id": %d, "text": "Line %d: the quick brown fox, caf\u00e9 %d, jumps over the lazy dog."}\n' $i $i $((i * 7919 % 1000))
    i=$((i + 1))
  done > "$1"
  printf '{"id": 1000}\nnot json at all\n' >> "$1"
}

case_tokenize_shards() {
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" --shard-tokens 2000 > "$STDOUT" 2> "$STDERR" ||
    fail "tokenize failed: $(cat "$STDERR")"
  grep -q "^tokenize: 80 documents" "$STDERR" || fail "no summary on stderr: $(cat "$STDERR")"
  # 80 documents: 4 for validation; each training document is its bytes and one end-of-document token.
  grep -qF "read 80 documents" "$STDOUT" || fail "not 80 documents read: $(cat "$STDOUT")"
  tokens=$(sed -n 's/^train: 76 documents, \([0-9]*\) tokens.*/\1/p' "$STDOUT")
  [ -n "$tokens" ] || fail "no 'train: 76 documents' line: $(cat "$STDOUT")"
  total=0
  for shard in $(ls "$WORK/shards" | grep '^train-'); do
    check_shard "$WORK/shards/$shard"
    total=$((total + count))
  done
  [ "$total" = "$tokens" ] || fail "the train shards hold $total tokens, tokenize reported $tokens"
  [ -f "$WORK/shards/train-00002.tok" ] || fail "$tokens tokens at 2000 a shard should make three train shards"
  check_shard "$WORK/shards/val-00000.tok"
  [ "$count" -gt 0 ] || fail "an empty validation shard"
  pretrain --data "$WORK/shards" --steps 2 --run-dir "$WORK/run" > "$STDOUT" 2> "$STDERR" ||
    fail "pretrain does not accept the shards: $(cat "$STDERR")"
  [ "$(wc -l < "$WORK/run/metrics.jsonl")" -eq 2 ] || fail "not two steps trained on the shards"
  grep -qF "validation perplexity" "$STDOUT" || fail "no validation on the val shards"
}

case_tokenize_missing_input() {
  expect_error "$WORK/missing: no such file or directory" \
    "$COTAN" tokenize "$WORK/missing" --out "$WORK/shards"
  [ ! -e "$WORK/shards" ] || fail "the output directory was created"
  expect_error "no input" "$COTAN" tokenize --out "$WORK/shards"
  mkdir "$WORK/empty"
  expect_error "$WORK/empty: the corpus is empty" "$COTAN" tokenize "$WORK/empty" --out "$WORK/shards"
  [ ! -e "$WORK/shards" ] || fail "the output directory was created"
}

case_tokenize_existing_shards() {
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" > /dev/null 2>&1 || fail "tokenize failed"
  remember "$WORK/shards"
  expect_error "$WORK/shards already holds token shards|remove them or choose another --out" \
    "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards"
  check_unchanged "$WORK/shards"
}

case_tokenize_jsonl_threads() {
  make_jsonl "$WORK/web.jsonl"
  zstd -q "$WORK/web.jsonl" -o "$WORK/web.jsonl.zst" || fail "zstd failed"
  for t in 1 2; do
    "$COTAN" tokenize "$WORK/web.jsonl.zst" --tokenizer "$FIXTURES/qwen2" --out "$WORK/t$t" --threads $t \
      > "$STDOUT" 2> "$STDERR" || fail "tokenize --threads $t failed: $(cat "$STDERR")"
  done
  grep -qF "read 120 documents" "$STDOUT" || fail "not 120 documents read: $(cat "$STDOUT")"
  grep -qF 'skipped 2 of 122 JSONL lines' "$STDOUT" || fail "the two bad lines are not reported: $(cat "$STDOUT")"
  for shard in train-00000.tok val-00000.tok; do
    cmp -s "$WORK/t1/$shard" "$WORK/t2/$shard" || fail "$shard differs between 1 and 2 threads"
  done
  # The qwen2 fixture has 4505 ids: u16 tokens, its vocabulary in the header, <|endoftext|> (id 0) ends each document.
  [ "$(read_uint "$WORK/t1/train-00000.tok" 28 4)" = 4505 ] || fail "vocabulary $(read_uint "$WORK/t1/train-00000.tok" 28 4), not 4505"
  [ "$(read_uint "$WORK/t1/train-00000.tok" 12 4)" = 1 ] || fail "not u16"
  "$COTAN" tokenize --decode "$WORK/t1/train-00000.tok" --tokenizer "$FIXTURES/qwen2" > "$STDOUT" 2> "$STDERR" ||
    fail "--decode failed: $(cat "$STDERR")"
  grep -qF "Line 0: the quick brown fox, café 0, jumps over the lazy dog.<|endoftext|>Line" "$STDOUT" ||
    fail "the decoded shard is not the corpus: $(head -c 300 "$STDOUT")"
  expect_error "was made with tokenizer|not with the byte tokenizer" "$COTAN" tokenize --decode "$WORK/t1/train-00000.tok"
  # gzip reads the same.
  gzip -c "$WORK/web.jsonl" > "$WORK/web.jsonl.gz"
  "$COTAN" tokenize "$WORK/web.jsonl.gz" --tokenizer "$FIXTURES/qwen2" --out "$WORK/gz" > /dev/null 2>&1 || fail "gzip input failed"
  cmp -s "$WORK/t1/train-00000.tok" "$WORK/gz/train-00000.tok" || fail ".gz and .zst give different shards"
}

case_tokenize_progress() {
  make_jsonl "$WORK/web.jsonl"
  script -q -e -c "\"$COTAN\" tokenize \"$WORK/web.jsonl\" --tokenizer \"$FIXTURES/qwen2\" --out \"$WORK/tty\"" \
    "$ROOT/tty.out" > /dev/null || fail "tokenize under a pseudo-terminal failed: $(cat "$ROOT/tty.out")"
  tr '\r' '\n' < "$ROOT/tty.out" > "$ROOT/tty.txt"
  grep -q "^tokenize \[#*\] 100.0%  [0-9.]* MB/s  ETA 0:00" "$ROOT/tty.txt" || fail "no bar with MB/s and ETA: $(cat "$ROOT/tty.txt")"
  "$COTAN" tokenize "$WORK/web.jsonl" --tokenizer "$FIXTURES/qwen2" --out "$WORK/log" > /dev/null 2> "$ROOT/log.txt" ||
    fail "tokenize into a log failed"
  ! grep -q "$(printf '\r')" "$ROOT/log.txt" || fail "a log holds carriage returns"
  grep -q "^tokenize: 120 documents, [0-9]* bytes -> [0-9]* tokens, [0-9.]* MB/s (0:0" "$ROOT/log.txt" ||
    fail "no plain summary line in the log: $(cat "$ROOT/log.txt")"
}

case_tokenize_bad_input() {
  make_jsonl "$WORK/web.jsonl"
  expect_error "$WORK/web.jsonl:121: no \"text\" field|--strict" \
    "$COTAN" tokenize "$WORK/web.jsonl" --tokenizer "$FIXTURES/qwen2" --out "$WORK/s" --strict
  expect_error "no \"body\" field" \
    "$COTAN" tokenize "$WORK/web.jsonl" --text-field body --strict --out "$WORK/s"
  printf '{"text": "fine"}\n{"text": "bad \\ud800 surrogate"\n' > "$WORK/bad.jsonl"
  expect_error "$WORK/bad.jsonl:2: not valid JSON" "$COTAN" tokenize "$WORK/bad.jsonl" --out "$WORK/s" --strict
  printf 'caf\351 au lait\n' > "$WORK/latin1.txt"
  expect_error "$WORK/latin1.txt: document 1: invalid UTF-8 at byte 3|--strict" \
    "$COTAN" tokenize "$WORK/latin1.txt" --tokenizer "$FIXTURES/qwen2" --out "$WORK/s" --strict
  "$COTAN" tokenize "$WORK/latin1.txt" --tokenizer "$FIXTURES/qwen2" --out "$WORK/lenient" > /dev/null 2>&1 ||
    fail "without --strict invalid UTF-8 is replaced, not refused"
  printf '{"model": {"type": "BPE", "vocab": ' > "$WORK/broken.json"
  expect_error "$WORK/broken.json: not valid JSON" "$COTAN" tokenize "$WORK/web.jsonl" --tokenizer "$WORK/broken.json" --out "$WORK/s"
  printf '{"model": {"type": "Unigram", "vocab": []}}' > "$WORK/unigram.json"
  expect_error "$WORK/unigram.json: model.type \"Unigram\" is not supported" \
    "$COTAN" tokenize "$WORK/web.jsonl" --tokenizer "$WORK/unigram.json" --out "$WORK/s"
  [ ! -e "$WORK/s" ] || fail "an output directory was made for bad input"
}

run_case
