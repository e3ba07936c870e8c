# Helpers of the CLI tests, sourced by the scripts beside it. Each script is run as
#   sh tests/cli/<script>.sh COTAN CASE
# and runs the function case_CASE with a fresh temporary directory $WORK; it prints
# "PASS CASE" or one "FAIL CASE: why" line per failed check, and exits non-zero on failure.
# A command's output goes to $STDOUT and $STDERR, snapshots to $SNAPSHOTS, all outside $WORK.
set -u
set -f  # no globbing: words and paths are used as they are

COTAN=$1
CASE=$2
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/cotan-cli.XXXXXX") || exit 1
trap 'rm -rf "$ROOT"' EXIT
WORK=$ROOT/work
SNAPSHOTS=$ROOT/snapshots
STDOUT=$ROOT/stdout
STDERR=$ROOT/stderr
mkdir "$WORK" "$SNAPSHOTS"
failures=0

fail() {
  echo "FAIL $CASE: $*"
  failures=$((failures + 1))
}

# A corpus of 80 fortune-format documents (about 5,600 bytes) in DIR/fortunes.
make_corpus() {  # DIR
  mkdir -p "$1"
  i=0
  while [ $i -lt 80 ]; do
    printf 'Document %d: the quick brown fox jumps over the lazy dog %d times.\n%%\n' $i $((i * 7919 % 1000))
    i=$((i + 1))
  done > "$1/fortunes"
}

# A model config.json small enough for a step to take a millisecond or two.
make_config() {  # FILE [ATTENTION_KIND [VOCAB]]
  cat > "$1" <<EOF
{"model_type": "llama", "vocab_size": ${3:-257}, "hidden_size": 16, "num_hidden_layers": 2,
 "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 24,
 "attention": {"kind": "${2:-softmax}"}}
EOF
}

make_corpus "$WORK/corpus"
make_config "$WORK/tiny.json"

# Runs `cotan COMMAND ARGS...` plus each option of DEFAULTS (OPTION=VALUE words) that ARGS lacks.
# With EXEC=exec the shell is replaced by cotan: `(EXEC=exec; pretrain ...) &` makes $! cotan's pid.
EXEC=
with_defaults() {  # COMMAND DEFAULTS ARGS...
  command=$1
  defaults=$2
  shift 2
  for pair in $defaults; do
    option=${pair%%=*}
    given=no
    for arg in "$@"; do
      [ "$arg" = "$option" ] && given=yes
    done
    [ $given = yes ] || set -- "$@" "$option" "${pair#*=}"
  done
  $EXEC "$COTAN" "$command" "$@"
}

# A tiny pretraining run and a tiny study (teacher and one student, 3 steps each), overridable.
pretrain() {
  with_defaults pretrain "--config=$WORK/tiny.json --data=$WORK/corpus --seq-len=16 --batch-size=2 --warmup=0
    --eval-every=0 --steps=3" "$@"
}
distill() {
  with_defaults distill "--teacher=$WORK/tiny.json --student=$WORK/tiny.json --attention=softmax --teacher-steps=3
    --steps=3 --data=$WORK/corpus --seq-len=16 --batch-size=2 --warmup=0 --eval-every=0 --cache-dir=$WORK/cache" "$@"
}

# Every directory and file under DIR, with the checksums of the files; run directories' .lock
# files (which a run rewrites with its pid when it takes the lock) are left out.
snapshot() {  # DIR
  (cd "$1" && find . ! -name .lock -print | LC_ALL=C sort && find . -type f ! -name .lock -exec cksum {} + | LC_ALL=C sort)
}

# Records DIR's snapshot; check_unchanged DIR compares against it.
remember() {  # DIR
  snapshot "$1" > "$SNAPSHOTS/$(echo "$1" | cksum | cut -d' ' -f1)"
}
check_unchanged() {  # DIR
  snapshot "$1" | cmp -s - "$SNAPSHOTS/$(echo "$1" | cksum | cut -d' ' -f1)" || fail "$1 was changed"
}

# The loss column of metrics.jsonl, one value per line.
losses() {  # FILE
  sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"
}

# Fails unless the two files hold the same number of values, each within a relative RTOL.
expect_close() {  # FILE_A FILE_B RTOL WHAT
  paste "$1" "$2" | awk -v rtol="$3" '
    { n++; d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2; if (d > rtol * s + 1e-12) bad++ }
    END { exit (n == 0 || bad > 0) }' || fail "$4 differ: $(paste "$1" "$2" | tr '\t\n' ' ;')"
  [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] || fail "$4: different numbers of steps"
}

# Runs COMMAND and checks that it fails with exactly one line on stderr, "cotan: ...", holding
# each of the '|'-separated WORDS. The line stays in $STDERR.
expect_error() {  # WORDS COMMAND...
  words=$1
  shift
  "$@" > "$STDOUT" 2> "$STDERR"
  rc=$?
  [ $rc -ne 0 ] || fail "exit status 0 from: $*"
  lines=$(wc -l < "$STDERR")
  [ "$lines" -eq 1 ] || fail "$lines lines on stderr instead of one: $(cat "$STDERR")"
  grep -q '^cotan: ' "$STDERR" || fail "stderr does not start with 'cotan: ': $(cat "$STDERR")"
  old_ifs=$IFS
  IFS='|'
  for word in $words; do
    grep -qF -- "$word" "$STDERR" || fail "stderr lacks '$word': $(cat "$STDERR")"
  done
  IFS=$old_ifs
  echo "  exit $rc: $(head -n 1 "$STDERR")"
}

# The "step" of a checkpoint's trainer.json.
checkpoint_step() {  # CHECKPOINT_DIR
  sed -n 's/^  "step": \([0-9]*\),*$/\1/p' "$1/trainer.json"
}

# metrics.jsonl without the timing fields.
deterministic_metrics() {  # FILE
  sed 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//' "$1"
}

run_case() {
  if ! command -v "case_$CASE" > /dev/null 2>&1; then
    echo "FAIL $CASE: no such case"
    exit 1
  fi
  "case_$CASE"
  if [ $failures -eq 0 ]; then
    echo "PASS $CASE"
    exit 0
  fi
  exit 1
}
