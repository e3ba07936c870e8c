# `cotan tokenize`: shards that `cotan pretrain --data` reads, and bad input.
# Usage: sh tokenize.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# An unsigned little-endian integer of BYTES bytes at OFFSET in FILE.
read_uint() {  # FILE OFFSET BYTES
  od -An -tu"$3" -j"$2" -N"$3" --endian=little "$1" | tr -d ' '
}

# The header (data.hpp: magic, version 2, dtype, count, largest id, zero) and the size of one
# shard; the count is left in $count.
check_shard() {  # FILE
  [ "$(head -c 8 "$1")" = COTANTOK ] || fail "$1: the magic is not COTANTOK"
  [ "$(read_uint "$1" 8 4)" = 2 ] || fail "$1: version $(read_uint "$1" 8 4), not 2"
  [ "$(read_uint "$1" 12 4)" = 1 ] || fail "$1: dtype $(read_uint "$1" 12 4), not 1 (u16)"
  count=$(read_uint "$1" 16 8)
  # Byte-level documents: every one ends with 256, and no id is larger.
  [ "$count" -eq 0 ] || [ "$(read_uint "$1" 24 4)" = 256 ] || fail "$1: largest id $(read_uint "$1" 24 4), not 256"
  [ "$(read_uint "$1" 28 4)" = 0 ] || fail "$1: bytes 28..31 are not zero"
  [ "$(wc -c < "$1")" -eq $((32 + 2 * count)) ] || fail "$1: $(wc -c < "$1") bytes for $count u16 tokens"
}

case_tokenize_shards() {
  "$COTAN" tokenize "$WORK/corpus" --out "$WORK/shards" --shard-tokens 2000 > "$STDOUT" 2> "$STDERR" ||
    fail "tokenize failed: $(cat "$STDERR")"
  [ ! -s "$STDERR" ] || fail "tokenize wrote to stderr: $(cat "$STDERR")"
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

run_case
