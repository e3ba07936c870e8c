# The benches' own claims, read from their JSON (no time is asserted): run as
#   sh tests/cli/bench.sh COTAN CASE
. "$(dirname "$0")/common.sh"

# A bench's JSON in FILE: the host it reports (CPU, load average, threads) and PYTHON_CONDITION
# on it, r, must hold.
check_json() {  # WHAT FILE PYTHON_CONDITION
  python3 - "$2" "$3" <<'PY' || fail "$1: $(cat "$2")"
import json, sys
r = json.load(open(sys.argv[1]))
host = r["host"]
ok = isinstance(host["cpu"], str) and len(host["load_average"]) == 3 and host["threads"] >= 1
sys.exit(0 if ok and eval("(" + sys.argv[2] + ")", {"r": r}) else 1)
PY
}

# bench kd-loss at 512 x 8192 (16 MiB per [N, V] tensor): the donated fused loss adds almost no
# memory (at most 1/8 of the composed loss's extra), the kept one exactly a new gradient, and all
# three agree.
case_kd_loss_memory() {
  "$COTAN" bench kd-loss --tokens 512 --vocab 8192 --repeat 1 --json > "$STDOUT" 2> "$STDERR" ||
    fail "bench kd-loss failed: $(cat "$STDERR")"
  python3 - "$STDOUT" <<'PY' || fail "$(cat "$STDOUT")"
import json, sys
r = json.load(open(sys.argv[1]))
if r["fused"]["peak_mib"] is None:
    sys.exit(0)  # no /proc/self/clear_refs: memory cannot be measured here
checks = {
    "memory_ratio >= 8": r["memory_ratio"] >= 8,
    "fused adds under 1/8 of a [N, V] tensor": r["fused"]["peak_mib"] < r["logits_mib"] / 8,
    "fused-kept adds one gradient": r["fused-kept"]["peak_mib"] >= r["logits_mib"],
    "composed adds more than the gradient": r["composed"]["peak_mib"] > 2 * r["logits_mib"],
    "gradients agree": r["max_grad_diff"] < 1e-6,
}
failed = [name for name, ok in checks.items() if not ok]
print("failed: " + ", ".join(failed) if failed else "ok")
sys.exit(1 if failed else 0)
PY
}

# bench kd-loss --fused-head at 2048 tokens x 4096 vocab (32 MiB per model's logits): the heads
# inside the loss add well under one model's logits, the composed heads more than both, and the
# two agree.
case_head_loss_memory() {
  "$COTAN" bench kd-loss --fused-head --tokens 2048 --vocab 4096 --hidden 64 --repeat 1 --json > "$STDOUT" \
    2> "$STDERR" || fail "bench kd-loss --fused-head failed: $(cat "$STDERR")"
  python3 - "$STDOUT" <<'PY' || fail "$(cat "$STDOUT")"
import json, sys
r = json.load(open(sys.argv[1]))
if r["fused-head"]["peak_mib"] is None:
    sys.exit(0)  # no /proc/self/clear_refs: memory cannot be measured here
checks = {
    "fused-head adds under half of one model's logits": r["fused-head"]["peak_mib"] < r["logits_mib"] / 2,
    "composed-head adds both models' logits": r["composed-head"]["peak_mib"] >= 2 * r["logits_mib"],
    # The sparse loss with the head inside: chunks of logits and the targets read to the host
    # (17-25 MiB here, the spread being malloc's), under one model's [N, V] logits; on the whole
    # logits it would add five times those (their f64 copy and gradient).
    "offline top-64 adds less than the logits": r["offline-top64"]["peak_mib"] < r["logits_mib"],
    "offline top-256 adds less than the logits": r["offline-top256"]["peak_mib"] < r["logits_mib"],
    "losses agree": r["value_diff"] < 1e-5,
    "gradients agree": r["max_grad_diff"] < 1e-5,
}
failed = [name for name, ok in checks.items() if not ok]
print("failed: " + ", ".join(failed) if failed else "ok")
sys.exit(1 if failed else 0)
PY
}

# bench attention's check of the fused kernels against the composed attention in f32: the CPU
# kernels in f32, and the tensor-core kernels (bf16, d = 64 and 128) on cuda:0 through the emulator.
case_attention_agreement() {
  check_agreement() {  # TOLERANCE ARGS...
    tolerance=$1
    shift
    "$@" --json > "$STDOUT" 2> "$STDERR" || { fail "$* failed: $(cat "$STDERR")"; return; }
    python3 - "$STDOUT" "$tolerance" <<'PY' || fail "$*: $(cat "$STDOUT")"
import json, sys
d = json.load(open(sys.argv[1]))["max_relative_difference"]
sys.exit(0 if sorted(d) == ["affine", "sink", "softmax"] and max(d.values()) < float(sys.argv[2]) else 1)
PY
  }
  check_agreement 1e-5 "$COTAN" bench attention --seq-len 70 --batch-size 1 --heads 4 --kv-heads 2 --repeat 1
  for d in 64 128; do
    COTAN_CUDA_EMULATOR=1 check_agreement 2e-2 "$COTAN" bench attention --device cuda --dtype bf16 --dim $d \
      --seq-len 70 --batch-size 1 --heads 2 --kv-heads 1 --repeat 1
  done
}

# The device benches the GPU script runs, on cuda:0 through the emulator at small sizes: they
# complete, and bench kd-loss's three variants agree there.
case_emulated_benches() {
  COTAN_CUDA_EMULATOR=1 "$COTAN" bench kd-loss --device cuda --tokens 48 --vocab 1500 --repeat 1 --json \
    > "$STDOUT" 2> "$STDERR" || fail "bench kd-loss --device cuda failed: $(cat "$STDERR")"
  python3 - "$STDOUT" <<'PY' || fail "bench kd-loss --device cuda: $(cat "$STDOUT")"
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["device"] == "cuda:0" and r["max_grad_diff"] < 1e-6 and r["value_diff"] < 1e-6 else 1)
PY
  COTAN_CUDA_EMULATOR=1 "$COTAN" bench matmul --device cuda --tf32 --sizes 48 --dtypes f32 --repeat 1 --json \
    > /dev/null 2> "$STDERR" || fail "bench matmul --device cuda --tf32 failed: $(cat "$STDERR")"
  COTAN_CUDA_EMULATOR=1 "$COTAN" bench generate --device cuda --model tiny-student --prompt-len 3 --new-tokens 2 \
    --repeats 1 --json > "$STDOUT" 2> "$STDERR" || fail "bench generate --device cuda failed: $(cat "$STDERR")"
  python3 - "$STDOUT" <<'PY' || fail "bench generate --device cuda: $(cat "$STDOUT")"
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["device"] == "cuda:0" and r["torch"] is None and "--device cpu" in r["note"] and
         r["cotan"]["tokens_per_s"] > 0 else 1)
PY
}

# What the benches with a PyTorch side report about the machine and the reference, read from their
# JSON at tiny sizes (no time is asserted), without a reference environment: the host, the
# measured FMA peak and each figure's fraction of it; with --torch, the fallback warning, and
# then either the fallback's description (where /usr/bin/python3 has torch) or one error line.
case_reference_fields() {
  # With --torch and no reference environment: the warning, then a description or an error.
  check_fallback() {  # WHAT ARGS...
    what=$1
    shift
    if COTAN_TORCH_ENV=$WORK/no-env "$@" --json > "$STDOUT" 2> "$STDERR"; then
      check_json "$what" "$STDOUT" 'r["torch"]["fallback"] is True and isinstance(r["torch"]["blas"], str) and
        r["torch"]["threads"] >= 1 and r["torch"]["python"] == "/usr/bin/python3"'
    else
      grep -q 'PyTorch is not available' "$STDERR" || fail "$what: $(cat "$STDERR")"
    fi
    grep -q "warning: no PyTorch reference environment at $WORK/no-env (bench/setup-reference.sh" "$STDERR" ||
      fail "$what: no fallback warning: $(cat "$STDERR")"
  }

  "$COTAN" bench matmul --sizes 32,16x8x24 --dtypes f32,f64 --repeat 1 --json > "$STDOUT" 2> "$STDERR" ||
    fail "bench matmul failed: $(cat "$STDERR")"
  check_json "bench matmul" "$STDOUT" 'r["torch"] is None and r["fma_peak"]["gflops"] > 0 and
    r["fma_peak"]["gflops_1_thread"] > 0 and r["fma_peak"]["gflops_after"] > 0 and
    r["fma_peak"]["isa"] in ("avx512", "avx2+fma", "scalar") and
    all(x["fraction_of_peak"] > 0 for x in r["results"]) and len(r["results"]) == 4'
  check_fallback "bench matmul --torch" "$COTAN" bench matmul --sizes 16 --dtypes f32 --repeat 1 --torch

  # --blis: with a build that found BLIS, its side of every f32 and f64 product (none for bf16);
  # without, one line saying how to get it.
  if "$COTAN" bench matmul --blis --sizes 16,12x20x8 --dtypes f32,f64,bf16 --layouts nn,tn --repeat 1 --json \
    > "$STDOUT" 2> "$STDERR"; then
    check_json "bench matmul --blis" "$STDOUT" 'r["blis"]["version"] != "" and r["blis"]["threads"] >= 1 and
      len(r["results"]) == 12 and
      all((x.get("blis_fraction_of_peak", 0) > 0 and x.get("blis_ratio", 0) > 0) == (x["dtype"] != "bf16") for x in r["results"]) and
      all(("blis_ms" in x) == (x["dtype"] != "bf16") for x in r["results"])'
  else
    grep -qx "cotan: \[bench\] --blis: this cotan was built without BLIS; install libblis-dev (apt-get install libblis-dev) and run ./build.sh again (meson finds it: -Dblis=auto)" "$STDERR" ||
      fail "bench matmul --blis: $(cat "$STDERR")"
  fi

  "$COTAN" bench attention --seq-len 8 --batch-size 1 --heads 2 --dim 4 --repeat 1 --json > "$STDOUT" 2> "$STDERR" ||
    fail "bench attention failed: $(cat "$STDERR")"
  check_json "bench attention" "$STDOUT" 'r["torch"] is None and r["config"]["threads"] >= 1'
  check_fallback "bench attention --torch" "$COTAN" bench attention --seq-len 8 --batch-size 1 --heads 2 --dim 4 \
    --repeat 1 --torch

  # bench train runs PyTorch when it can: without a reference environment it warns, then runs the
  # fallback or says why not.
  COTAN_TORCH_ENV=$WORK/no-env "$COTAN" bench train --batch-size 1 --seq-len 8 --steps 1 --warmup 0 \
    --torch-compile-warmup 1 --json > "$STDOUT" 2> "$STDERR" || fail "bench train failed: $(cat "$STDERR")"
  check_json "bench train" "$STDOUT" '"ratio_compiled" in r and (r["torch"] is None and "note" in r and
    r["turn_warmup"] == 0 or r["torch"] is not None and r["torch"]["fallback"] is True and
    r["torch"]["threads"] >= 1 and r["turn_warmup"] == 1)'
  grep -q "warning: no PyTorch reference environment at $WORK/no-env" "$STDERR" ||
    fail "bench train: no fallback warning: $(cat "$STDERR")"

  # A --torch-python that is not there is one line naming the option.
  "$COTAN" bench matmul --sizes 16 --repeat 1 --torch --torch-python "$WORK/nothing" > "$STDOUT" 2> "$STDERR" &&
    fail "bench matmul --torch-python $WORK/nothing succeeded"
  grep -qx "cotan: \[bench\] --torch-python $WORK/nothing is not an executable file" "$STDERR" ||
    fail "bench matmul --torch-python: $(cat "$STDERR")"

  # The reference scripts parse (CI has no torch to run them).
  for script in torch_reference.py torch_train_reference.py; do
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$(dirname "$0")/../../bench/$script" ||
      fail "bench/$script does not parse"
  done
}

# bench generate: cotan alone on a preset's random weights and on a model directory; against a
# stand-in reference (tests/cli/fake_generate_reference.py: eager 0.5 s a run, compiled 0.25 s
# and 2 s for its first, 0.1 s for one token), whose figures and ratios the JSON must carry,
# computed from those times, the compiling stand-in's one graph counted in the untimed runs, not
# the timed ones; eager only with --no-torch-compile, or when the reference cannot compile; and
# its bad options.
case_generate_bench() {
  "$COTAN" bench generate --model tiny-student --prompt-len 5 --new-tokens 4 --batch 2 --repeats 1 --no-torch \
    --json > "$STDOUT" 2> "$STDERR" || fail "bench generate failed: $(cat "$STDERR")"
  check_json "bench generate" "$STDOUT" 'r["model"] == "tiny-student (random weights)" and r["model_type"] == "llama" and
    r["params"] > 0 and r["batch"] == 2 and r["new_tokens"] == 4 and r["torch"] is None and
    r["cotan"]["tokens_per_s"] > 0 and r["cotan"]["prefill_ms"] > 0 and len(r["cotan"]["run_ms"]) == 1 and
    abs(r["cotan"]["tokens_per_s"] - 8 / (r["cotan"]["ms"] / 1e3)) < 1e-3 * r["cotan"]["tokens_per_s"]'
  dir=$(dirname "$0")/../hf/fixtures/llama_gqa
  "$COTAN" bench generate --model "$dir" --prompt-len 3 --new-tokens 2 --repeats 1 --no-torch --json \
    > "$STDOUT" 2> "$STDERR" || fail "bench generate --model $dir failed: $(cat "$STDERR")"
  check_json "bench generate --model DIR" "$STDOUT" 'r["model"].endswith("llama_gqa") and r["cotan"]["tokens_per_s"] > 0'

  # 16 new tokens: cotan's decode should take measurably longer than its one-token run; when a
  # loaded machine makes it not, the ratios of decode times must be null.
  "$COTAN" bench generate --model tiny-student --prompt-len 5 --new-tokens 16 --batch 3 --repeats 2 --torch \
    --torch-python "$(command -v python3)" --torch-script "$(dirname "$0")/fake_generate_reference.py" --json \
    > "$STDOUT" 2> "$STDERR" || fail "bench generate --torch (stand-in) failed: $(cat "$STDERR")"
  check_json "bench generate --torch (stand-in)" "$STDOUT" 'r["torch"]["transformers"] == "fake-1.0" and
    r["torch"]["ms"] == 500 and r["torch"]["prefill_ms"] == 100 and r["torch"]["tokens_per_s"] == 96 and
    abs(r["torch"]["decode_tokens_per_s"] - 112.5) < 1e-9 and
    abs(r["ratio"] - r["cotan"]["tokens_per_s"] / 96) < 1e-4 * r["ratio"] and
    ((r["cotan"]["decode_tokens_per_s"] is None and r["cotan"]["ms"] <= r["cotan"]["prefill_ms"] and
      r["ratio_decode"] is None and r["ratio_decode_compiled"] is None) or
     (abs(r["ratio_decode"] - 0.4 / ((r["cotan"]["ms"] - r["cotan"]["prefill_ms"]) / 1e3)) < 1e-3 * r["ratio_decode"] and
      abs(r["ratio_decode_compiled"] - 0.15 / ((r["cotan"]["ms"] - r["cotan"]["prefill_ms"]) / 1e3)) <
        1e-3 * r["ratio_decode_compiled"])) and
    r["tokens_compared"] == 48 and 0 <= r["tokens_agree"] <= 48 and
    r["torch"]["compiled"]["ms"] == 250 and r["torch"]["compiled"]["prefill_ms"] == 100 and
    r["torch"]["compiled"]["tokens_per_s"] == 192 and abs(r["torch"]["compiled"]["decode_tokens_per_s"] - 300) < 1e-9 and
    len(r["torch"]["compiled"]["run_ms"]) == 2 and r["torch"]["compiled"]["first_run_s"] == 2 and
    r["torch"]["compiled"]["graphs_compiled_while_timed"] == 0 and 0 <= r["torch"]["compiled"]["tokens_agree"] <= 48 and
    abs(r["ratio_compiled"] - r["cotan"]["tokens_per_s"] / 192) < 1e-4 * r["ratio_compiled"]'
  "$COTAN" bench generate --model tiny-student --prompt-len 5 --new-tokens 4 --repeats 1 --torch --no-torch-compile \
    --torch-python "$(command -v python3)" --torch-script "$(dirname "$0")/fake_generate_reference.py" \
    > "$STDOUT" 2> "$STDERR" || fail "bench generate --no-torch-compile (stand-in) failed: $(cat "$STDERR")"
  grep -q "^transformers eager " "$STDOUT" && ! grep -q "^transformers compiled  *[0-9]" "$STDOUT" &&
    grep -qF "transformers compiled not timed: --no-torch-compile" "$STDOUT" ||
    fail "bench generate --no-torch-compile (stand-in): $(cat "$STDOUT")"
  # A reference that cannot compile: eager is timed, compiled is null with the reason.
  FAKE_GENERATE_NO_COMPILE=1 "$COTAN" bench generate --model tiny-student --prompt-len 5 --new-tokens 16 --repeats 1 \
    --torch --torch-python "$(command -v python3)" --torch-script "$(dirname "$0")/fake_generate_reference.py" --json \
    > "$STDOUT" 2> "$STDERR" || fail "bench generate (stand-in without compile) failed: $(cat "$STDERR")"
  check_json "bench generate (stand-in without compile)" "$STDOUT" 'r["torch"]["ms"] == 500 and
    r["torch"]["compiled"] is None and "no C++ compiler for torch.compile" in r["torch"]["compiled_note"] and
    r["ratio_compiled"] is None and r["ratio_decode_compiled"] is None and r["ratio"] > 0 and
    (r["ratio_decode"] is None if r["cotan"]["decode_tokens_per_s"] is None else r["ratio_decode"] > 0)'

  expect_error() {  # MESSAGE ARGS...
    message=$1
    shift
    "$COTAN" bench generate "$@" > "$STDOUT" 2> "$STDERR" && fail "bench generate $* succeeded"
    grep -qxF "cotan: $message" "$STDERR" || fail "bench generate $*: $(cat "$STDERR")"
  }
  expect_error "[option] --new-tokens 1: expected an integer in [2, 1048576]" --model tiny-student --new-tokens 1
  expect_error "[bench generate] --dtype takes f32 or bf16, got f64" --model tiny-student --dtype f64
  expect_error "[bench generate] --prompt-len 1000 + --new-tokens 32 - 1 exceeds the model's 1024 positions" \
    --model tiny-student --prompt-len 1000 --no-torch
  expect_error "[bench generate] --torch and --no-torch exclude each other" --model tiny-student --torch --no-torch
}

# bench matmul --step: the products of one bench train step, each with how often the step runs
# it, and the step's totals over them, recomputed here from the per-product figures. A training
# step runs all three kinds of product: x W^T forward (nt), dX = G W (nn) and dW = G^T X (tn).
case_matmul_step() {
  "$COTAN" bench matmul --step --repeat 1 --json > "$STDOUT" 2> "$STDERR" ||
    fail "bench matmul --step failed: $(cat "$STDERR")"
  python3 - "$STDOUT" <<'PY' || fail "$(cat "$STDOUT")"
import json, sys
r = json.load(open(sys.argv[1]))
s, results = r["step"], r["results"]
flops = sum(x["count"] * 2 * x["m"] * x["n"] * x["k"] for x in results)
ms = sum(x["count"] * x["ms"] for x in results)
shapes = [(x["m"], x["n"], x["k"], x["layout"]) for x in results]
checks = {
    "step named": s["teacher"] == "tiny-teacher" and s["student"] == "tiny-student" and s["batch"] == 8,
    "products counted": s["products"] == sum(x["count"] for x in results) and s["distinct"] == len(results),
    "distinct shapes": len(set(shapes)) == len(shapes),
    "counts": all(x["count"] >= 1 and 0 <= x["accumulating"] <= x["count"] for x in results),
    "f32 only": all(x["dtype"] == "f32" for x in results),
    "nt, nn and tn products": {"nt", "nn", "tn"} <= {x["layout"] for x in results},
    # The affine student (hidden 128, 4 query heads and 2 kv heads of 32) projects q, k, v and
    # each query head's alpha in one product: 128 + 2 * 64 + 4 columns.
    "the affine student's joint projection": any(x["n"] == 260 and x["layout"] == "nt" for x in results),
    "affine": s["attention"] == "affine" and s["seq_len"] == 128,
    "GFLOP": abs(s["gflop"] - flops / 1e9) <= 1e-6 * flops / 1e9,
    "ms": abs(s["ms"] - ms) <= 1e-4 * ms,
    "GFLOP/s": abs(s["gflops"] - flops / (ms * 1e-3) / 1e9) <= 1e-3 * s["gflops"],
    "fraction of peak": abs(s["fraction_of_peak"] - s["gflops"] / r["fma_peak"]["gflops"]) <= 1e-3,
    "no torch side": r["torch"] is None and "torch_ms" not in s,
}
failed = [name for name, ok in checks.items() if not ok]
print("failed: " + ", ".join(failed) if failed else "ok")
sys.exit(1 if failed else 0)
PY
  # The step chooses the products: --sizes, --layouts and --dtypes are refused by name.
  for option in "--sizes 64" "--layouts nt" "--dtypes f64"; do
    # shellcheck disable=SC2086
    "$COTAN" bench matmul --step $option --repeat 1 > "$STDOUT" 2> "$STDERR" &&
      fail "bench matmul --step $option succeeded"
    grep -qx "cotan: \[bench\] --step times the step's own products; it takes no ${option%% *}" "$STDERR" ||
      fail "bench matmul --step $option: $(cat "$STDERR")"
  done
}

# bench/cpu-report.sh, cotan alone and tiny: every bench of every round and thread count leaves
# its JSON, and the table's medians are those of the JSONs, recomputed here.
case_cpu_report() {
  script="$(dirname "$0")/../../bench/cpu-report.sh"
  bash "$script" --cotan "$COTAN" --no-torch --rounds 3 --threads "2 1" --sizes 48,40x24x56 --train-steps 1 \
    --attention-args "--seq-len 16 --batch-size 1 --heads 2 --dim 8" --bf16-sizes 40 --out "$WORK/report" \
    > "$STDOUT" 2> "$STDERR" ||
    fail "cpu-report.sh failed: $(cat "$STDERR")"
  "$COTAN" info --json > "$WORK/info.json" || fail "cotan info --json failed"
  python3 - "$WORK/report" "$STDOUT" "$WORK/info.json" <<'PY' || fail "$(cat "$STDOUT")"
import json, pathlib, statistics, sys
out, table = pathlib.Path(sys.argv[1]), open(sys.argv[2]).read()
# The bf16 GEMM both ways only in a build with the AVX512_BF16 kernel.
dot = "avx512_bf16" in json.load(open(sys.argv[3]))["cpu_gemm"]["bf16_kernels"]
benches = ("squares", "step", "train", "attention") + (("bf16", "bf16dot") if dot else ())
names = [f"{b}-t{t}-r{r}.json" for b in benches for t in (1, 2) for r in (1, 2, 3)]
if not dot and list(out.glob("bf16*")):
    sys.exit("bf16 runs in a build without the AVX512_BF16 kernel")
missing = [n for n in names if not (out / n).is_file()]
if missing:
    sys.exit(f"missing: {missing}")
rows = {}
for line in table.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 5 and cells[0].isdigit():
        rows[(int(cells[0]), cells[1])] = cells[2:]
def values(bench, threads, get):
    return [get(json.load(open(out / f"{bench}-t{threads}-r{r}.json"))) for r in (1, 2, 3)]
for threads in (1, 2):
    step = values("step", threads, lambda r: 100 * r["step"]["fraction_of_peak"])
    label = next(k for k in rows if k[0] == threads and k[1].startswith("GEMM at the step's"))
    expected = f"{statistics.median(step):.0f}% ({min(step):.0f}-{max(step):.0f})"
    if rows[label][0] != expected:
        sys.exit(f"{label}: {rows[label][0]} != {expected}")
    tokens = values("train", threads, lambda r: r["cotan"]["tokens_per_s"])
    got = rows[(threads, "bench train, tokens/s: eager PyTorch")]
    if got != [f"{statistics.median(tokens):.0f} ({min(tokens):.0f}-{max(tokens):.0f})", "-", "-"]:
        sys.exit(f"bench train row {got} for {tokens}")
    if (threads, "GEMM 40x24x56 nn, % of peak") not in rows or (threads, "GEMM 48 nn, % of peak") not in rows:
        sys.exit("no row for a size")
    if dot and (threads, "bf16 GEMM on vdpbf16ps, 40 nt, % of the fp32 peak") not in rows:
        sys.exit("no row for the bf16 GEMM on vdpbf16ps")
if "reference: none (PyTorch not timed)" not in table or (out / "table.md").read_text() != table:
    sys.exit("header or table.md")
PY
  bash "$script" --cotan "$COTAN" --rounds 0 > "$STDOUT" 2> "$STDERR" && fail "cpu-report.sh --rounds 0 succeeded"
  grep -qx "\[cpu-report\] error: --rounds must be a positive number, got '0'" "$STDERR" ||
    fail "cpu-report.sh --rounds 0: $(cat "$STDERR")"
}

run_case
