#!/usr/bin/env python3
"""The table of bench/cpu-report.sh: reads the benches' JSON files in DIR, named
BENCH-tTHREADS-rROUND.json (BENCH: squares, step, train, attention, bf16, bf16dot), and prints markdown: per
thread count, the median over the rounds of each figure with its range, cotan beside PyTorch.

    python3 bench/cpu_report.py DIR

Only the standard library: it runs where the benches ran, with or without torch.
"""
import json
import pathlib
import re
import statistics
import sys

NAME = re.compile(r"^(squares|step|train|attention|bf16|bf16dot)-t(\d+)-r(\d+)\.json$")


def load(directory):
    """{(bench, threads): [the JSON of each round, by round]}"""
    runs = {}
    for path in sorted(pathlib.Path(directory).iterdir()):
        match = NAME.match(path.name)
        if not match:
            continue
        bench, threads, round_ = match.group(1), int(match.group(2)), int(match.group(3))
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            sys.exit(f"cpu_report: {path}: not JSON ({e})")
        runs.setdefault((bench, threads), []).append((round_, data))
    return {key: [data for _, data in sorted(value, key=lambda r: r[0])] for key, value in runs.items()}


def spread(values, form, unit=""):
    """'median<unit> (min-max)' of the values in the format `form` (".2f"), or the median alone
    when there is one value; '-' for none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    text = f"{statistics.median(values):{form}}{unit}"
    if len(values) > 1:
        text += f" ({min(values):{form}}-{max(values):{form}})"
    return text


def percent(fractions):
    return spread([None if v is None else 100 * v for v in fractions], ".0f", "%")


def torch_name(runs):
    for data in runs:
        torch = data.get("torch")
        if torch:
            return f"PyTorch {torch['torch']} ({torch['blas']})"
    return None


def product_rows(runs, label, of_peak="% of peak"):
    """A row per product of `bench matmul` runs (one per round): % of the fp32 FMA peak, cotan's
    and PyTorch's, and the ratio."""
    rows, shapes = [], []
    for result in runs[0]["results"]:
        key = (result["m"], result["n"], result["k"], result["layout"])
        if key not in shapes:
            shapes.append(key)
    for m, n, k, layout in shapes:
        found = [next((x for x in r["results"] if (x["m"], x["n"], x["k"], x["layout"]) == (m, n, k, layout)), {})
                 for r in runs]
        size = f"{m}" if m == n == k else f"{m}x{n}x{k}"
        rows.append((f"{label} {size} {layout}, {of_peak}",
                     percent([x.get("fraction_of_peak") for x in found]),
                     percent([x.get("torch_fraction_of_peak") for x in found]),
                     spread([x.get("ratio") for x in found], ".2f")))
    return rows


def rows_for(runs, threads):
    rows = []
    squares = runs.get(("squares", threads), [])
    if squares:
        peaks = [r["fma_peak"]["gflops"] for r in squares if r.get("fma_peak")]
        rows.append((f"fp32 FMA peak, {threads} thread(s)", spread(peaks, ".0f") + " GFLOP/s", "", ""))
        rows += product_rows(squares, "GEMM")
    step = runs.get(("step", threads), [])
    if step:
        totals = [r["step"] for r in step]
        rows.append((f"GEMM at the step's {totals[0]['products']} products ({totals[0]['gflop']:.2f} GFLOP), % of peak",
                     percent([t.get("fraction_of_peak") for t in totals]),
                     percent([t.get("torch_fraction_of_peak") for t in totals]),
                     spread([t.get("ratio") for t in totals], ".2f")))
        def slowest(r, key):
            return min((x[key] for x in r["results"] if key in x), default=None)
        rows.append(("GEMM, the step's slowest product, % of peak", percent([slowest(r, "fraction_of_peak") for r in step]),
                     percent([slowest(r, "torch_fraction_of_peak") for r in step]), ""))
    train = runs.get(("train", threads), [])
    if train:
        torch = [r["torch"] or {} for r in train]
        ours = spread([r["cotan"]["tokens_per_s"] for r in train], ".0f")
        rows.append(("bench train, tokens/s: eager PyTorch", ours,
                     spread([t.get("tokens_per_s") for t in torch], ".0f"),
                     spread([r.get("ratio") for r in train], ".2f")))
        rows.append(("bench train, tokens/s: torch.compile", ours,
                     spread([(t.get("compiled") or {}).get("tokens_per_s") for t in torch], ".0f"),
                     spread([r.get("ratio_compiled") for r in train], ".2f")))
        rows.append(("bench train, largest relative loss difference", "",
                     spread([r.get("max_rel_loss_diff") for r in train], ".1e"), ""))
    attention = runs.get(("attention", threads), [])
    if attention:
        config = attention[0]["config"]
        shape = f"B{config['batch']} T{config['seq']} H{config['heads']} d{config['dim']}"
        sdpa = [next((x["ms"] for x in r.get("torch_results") or [] if x["impl"] == "sdpa"), None) for r in attention]
        for kind in [x["kind"] for x in attention[0]["results"] if x["impl"] == "fused"]:
            fused = [next(x["ms"] for x in r["results"] if x["kind"] == kind and x["impl"] == "fused") for r in attention]
            ratios = [None if s is None else s / f for s, f in zip(sdpa, fused)]
            rows.append((f"attention fwd+bwd {shape}, {kind} fused vs SDPA, ms", spread(fused, ".3g"),
                         spread(sdpa, ".3g"), spread(ratios, ".2f")))
    for bench, kernel, label in (("bf16", "f32", "bf16 GEMM widened to f32,"),
                                 ("bf16dot", "avx512_bf16", "bf16 GEMM on vdpbf16ps,")):
        if runs.get((bench, threads)):
            ran = {r["host"]["gemm"].get("bf16") for r in runs[(bench, threads)]}
            if ran != {kernel}:
                sys.exit(f"cpu_report: the {bench} runs multiplied bf16 on {sorted(map(str, ran))}, not {kernel}")
            rows += product_rows(runs[(bench, threads)], label, "% of the fp32 peak")
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = pathlib.Path(sys.argv[1])
    if not directory.is_dir():
        sys.exit(f"cpu_report: {directory} is not a directory")
    runs = load(directory)
    if not runs:
        sys.exit(f"cpu_report: no BENCH-tN-rK.json in {directory}")
    table = [(threads, row) for threads in sorted({threads for _, threads in runs}, reverse=True)
             for row in rows_for(runs, threads)]
    everything = [data for value in runs.values() for data in value]
    host = everything[0]["host"]
    loads = [data["host"]["load_average"][0] for data in everything]
    counts = sorted({len(value) for value in runs.values()}, reverse=True)
    rounds = " or ".join(str(n) for n in counts)
    print(f"CPU: {host['cpu']}; GEMM kernel {host['gemm']['kernel']}; 1-minute load {min(loads):.2f}-{max(loads):.2f} "
          f"over the runs; median of {rounds} round(s) (min-max)")
    print(f"reference: {torch_name(everything) or 'none (PyTorch not timed)'}")
    print()
    print("ratios: cotan's speed over PyTorch's (> 1: cotan is faster)")
    print()
    print("| threads | figure | cotan | PyTorch | cotan ÷ PyTorch |")
    print("|---|---|---|---|---|")
    for threads, (figure, ours, theirs, ratio) in table:
        print(f"| {threads} | {figure} | {ours} | {theirs} | {ratio} |")


if __name__ == "__main__":
    main()
