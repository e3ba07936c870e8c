#!/usr/bin/env bash
# Runs one fuzz harness of tests/fuzz for a while (README.md, "Fuzzing"):
#
#   tests/fuzz/run.sh BUILD_DIR TARGET [SECONDS] [libFuzzer options...]
#   tests/fuzz/run.sh build safetensors 3600
#
# TARGET: safetensors, sharded_index, config, token_shard, checkpoint_meta, jsonl or tokenizer; SECONDS defaults to
# 20, what `meson test --suite fuzz` gives each. Everything lives in BUILD_DIR/tests/fuzz/:
#   seeds/TARGET/    rewritten by make_seeds on every run
#   corpus/TARGET/   the inputs libFuzzer found interesting, kept from run to run
#   crashes/TARGET/  a reproducer per finding (crash-*, leak-*, timeout-*, oom-*); replay one
#                    with BUILD_DIR/tests/fuzz/fuzz_TARGET FILE
# Exits 0 when the time ran out without a finding, non-zero after one.
set -uo pipefail

here=$(dirname "$(readlink -f "$0")")
build=${1:?usage: run.sh BUILD_DIR TARGET [SECONDS] [libFuzzer options...]}
target=${2:?usage: run.sh BUILD_DIR TARGET [SECONDS] [libFuzzer options...]}
seconds=${3:-20}
shift $(($# < 3 ? $# : 3))

dir=$(readlink -f "$build")/tests/fuzz
harness=$dir/fuzz_$target
if [[ ! -x "$harness" ]]; then
  echo "[fuzz] no $harness: build $build with clang++ and libFuzzer (meson -Dfuzz=enabled; Debian: clang, libclang-rt-14-dev)" >&2
  exit 1
fi
seeds=$dir/seeds/$target corpus=$dir/corpus/$target crashes=$dir/crashes/$target
rm -rf "$seeds"
"$dir/make_seeds" "$target" "$seeds" || exit 1
mkdir -p "$corpus" "$crashes"

# libFuzzer's default exit status for a finding is 77, which meson reads as "skipped": use 1.
options=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
         -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$crashes/")
[[ "$target" == token_shard ]] || options+=(-dict="$here/json.dict")

# Sanitizer reports with their stacks; libFuzzer writes the reproducer before the process ends.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# New inputs go to the first directory, the corpus; the seeds are read only.
"$harness" "${options[@]}" "$@" "$corpus" "$seeds"
status=$?
if ((status != 0)); then
  echo "[fuzz] $target: a finding (exit status $status); reproducers in $crashes:" >&2
  ls -t "$crashes" | head -5 | sed "s|^|  $harness $crashes/|" >&2
fi
exit $status
