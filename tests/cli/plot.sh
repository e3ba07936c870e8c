# `cotan plot RUN_DIR` and the study's figures: drawn with matplotlib as PNG and PDF from the
# CSVs beside them; without a Python that has matplotlib the study still succeeds and says how to
# draw them, and `cotan plot` is one error line.
# Usage: sh plot.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# Whether this machine can draw: the Python the study would use imports matplotlib.
have_matplotlib() {
  for python in python3 /usr/bin/python3; do
    "$python" -c 'import matplotlib' > /dev/null 2>&1 && return 0
  done
  return 1
}

case_plot_study() {
  if ! have_matplotlib; then
    echo "SKIP: no Python with matplotlib"
    exit 77
  fi
  distill --run-dir "$WORK/study" --attention softmax,gated > "$STDOUT" 2> "$STDERR" || fail "the study failed: $(cat "$STDERR")"
  grep -q '^figures: 8 drawn with matplotlib ' "$STDOUT" || fail "the study did not draw its figures: $(cat "$STDOUT")"
  for name in kd_loss grad_norm first_token_weight first_token_share entropy weight_sum_hist attention_softmax attention_gated; do
    [ "$(head -c 8 "$WORK/study/$name.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$name.png is not a PNG"
    [ "$(head -c 5 "$WORK/study/$name.pdf")" = "%PDF-" ] || fail "$name.pdf is not a PDF"
  done
  # Drawn again from the CSVs alone.
  rm "$WORK/study/"*.png "$WORK/study/"*.pdf
  "$COTAN" plot "$WORK/study" > "$STDOUT" 2> "$STDERR" || fail "cotan plot failed: $(cat "$STDERR")"
  grep -q "^figures: 8 drawn with matplotlib .* in $WORK/study (PNG, PDF): kd_loss, grad_norm," "$STDOUT" ||
    fail "cotan plot said: $(cat "$STDOUT")"
  [ -s "$WORK/study/kd_loss.png" ] && [ -s "$WORK/study/attention_gated.pdf" ] || fail "cotan plot drew nothing"
  "$COTAN" plot --print-script | grep -q '^import matplotlib$' || fail "--print-script does not print the script"
}

case_plot_without_matplotlib() {
  export COTAN_PYTHON=/nonexistent/python3
  distill --run-dir "$WORK/study" > "$STDOUT" 2> "$STDERR" || fail "the study failed without matplotlib: $(cat "$STDERR")"
  grep -qF "figures: no Python with matplotlib (tried /nonexistent/python3): the figures' CSVs are in $WORK/study; to draw them, install matplotlib (Debian: apt-get install python3-matplotlib) and run \`cotan plot $WORK/study\`" "$STDOUT" ||
    fail "the study does not say how to draw its figures: $(cat "$STDOUT")"
  [ -s "$WORK/study/kd_loss.csv" ] && [ ! -e "$WORK/study/kd_loss.png" ] || fail "not the CSVs alone"
  [ -s "$WORK/study/table.md" ] || fail "no table.md"
  expect_error "[plot] no Python with matplotlib" "$COTAN" plot "$WORK/study"
}

case_plot_bad_input() {
  expect_error "[plot] $WORK/nowhere: not a directory" "$COTAN" plot "$WORK/nowhere"
  expect_error "[plot] a run directory is required" "$COTAN" plot
  mkdir "$WORK/empty"
  expect_error "[plot] $WORK/empty holds no figure CSVs" "$COTAN" plot "$WORK/empty"
}

run_case
