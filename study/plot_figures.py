#!/usr/bin/env python3
"""Draws a cotan study's figures with matplotlib from the tidy CSVs the study writes beside them
(docs/formats.md, "Study outputs"): NAME.png for viewing and NAME.pdf for papers, for every
figure CSV of the run directory.

    python3 study/plot_figures.py RUN_DIR          # or `cotan plot RUN_DIR`, which runs this script

`cotan distill` runs it at the end of a study (the binary carries a copy of this file). It needs
matplotlib (Debian: python3-matplotlib, which build.sh installs) and nothing else.

    kd_loss, grad_norm             per step (variant,seed,step,metric,value), log y: the mean over
                                   seeds as a line, the smallest to the largest seed as a band
    first_token_weight,            per layer (variant,seed,layer,metric,value): layers as
    first_token_share, entropy     categories, a marker per layer, the same mean and band
    alpha_<variant>                mean alpha per layer and head (variant,seed,layer,head,metric,
                                   value), the mean over seeds: one colour scale for every
                                   variant, the values in the cells
    weight_sum_hist                the per-query weight sums (variant,seed,bin,bin_lo,bin_hi,count,
                                   fraction): one outline per variant, its seeds pooled
    attention_<variant>            the last layer's A (variant,seed,layer,query,key,weight): query
                                   rows, key columns, masked keys grey, one colour scale for every
                                   variant

Each file is written to a temporary name and renamed, so a reader never sees half a figure. The
output does not depend on the time: the PDFs carry no creation date.
"""

import csv
import math
import os
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FORMATS = ("png", "pdf")
DPI = 150

PER_STEP = OrderedDict([
    ("kd_loss", ("Training KD loss", "KD loss")),
    ("grad_norm", ("Gradient norm before clipping", r"$\|g\|$")),
])
PER_LAYER = OrderedDict([
    ("first_token_weight", ("First-token attention weight", r"mean $A_{i0}$")),
    ("first_token_share", ("First-token weight / the query's weight sum", r"mean $A_{i0} / \sum_j A_{ij}$")),
    ("entropy", ("Attention entropy", "entropy (nats)")),
])


def number(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def by_variant(rows):
    """Rows grouped by variant, in the order the variants first appear (the study's order)."""
    out = OrderedDict()
    for row in rows:
        out.setdefault(row["variant"], []).append(row)
    return out


def spread(values):
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return sum(finite) / len(finite), min(finite), max(finite)


def save(fig, base):
    """base.png and base.pdf, each written under a temporary name and renamed."""
    for fmt in FORMATS:
        path = f"{base}.{fmt}"
        tmp = f"{path}.tmp.{os.getpid()}"
        metadata = {"CreationDate": None} if fmt == "pdf" else {"Software": None}
        fig.savefig(tmp, format=fmt, dpi=DPI, bbox_inches="tight", metadata=metadata)
        os.replace(tmp, path)
    plt.close(fig)


def seeds_note(n):
    return f" (mean of {n} seeds, band: min to max)" if n > 1 else ""


def curves(rows, index):
    """Per variant: x values, the mean over seeds, the min and max (None with one seed), seeds."""
    out = OrderedDict()
    for variant, vrows in by_variant(rows).items():
        per_seed = OrderedDict()
        for row in vrows:
            per_seed.setdefault(row["seed"], {})[int(row[index])] = number(row["value"])
        first = next(iter(per_seed.values()))
        xs = sorted(first)
        mean, lo, hi = [], [], []
        for x in xs:
            m, a, b = spread([s.get(x, math.nan) for s in per_seed.values()])
            mean.append(m)
            lo.append(a)
            hi.append(b)
        out[variant] = (xs, mean, lo, hi, len(per_seed))
    return out


def line_figure(path, base, title, ylabel, per_step):
    data = curves(read_rows(path), "step" if per_step else "layer")
    if not data:
        return False
    seeds = max(c[4] for c in data.values())
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (variant, (xs, mean, lo, hi, n)) in enumerate(data.items()):
        color = f"C{i % 10}"
        if per_step:
            # A log axis: values that are not positive are left out (the line breaks there).
            def clean(ys):
                return [y if math.isfinite(y) and y > 0 else math.nan for y in ys]
            mean, lo, hi = clean(mean), clean(lo), clean(hi)
        if n > 1:
            ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.plot(xs, mean, color=color, label=variant, marker=None if per_step else "o",
                linewidth=1.2 if per_step else 1.5)
    if per_step:
        ax.set_yscale("log")
        ax.set_xlabel("step")
    else:
        layers = sorted({x for xs, *_ in data.values() for x in xs})
        ax.set_xticks(layers)
        ax.set_xlim(layers[0] - 0.5, layers[-1] + 0.5)
        ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.set_title(title + seeds_note(seeds))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, base)
    return True


def alpha_grids(paths):
    """Per file: variant, seeds, and the [layer][head] mean over seeds."""
    out = []
    for path in paths:
        rows = read_rows(path)
        if not rows:
            continue
        cells = {}
        seeds = set()
        for row in rows:
            cells.setdefault((int(row["layer"]), int(row["head"])), []).append(number(row["value"]))
            seeds.add(row["seed"])
        layers = 1 + max(l for l, _ in cells)
        heads = 1 + max(h for _, h in cells)
        grid = [[spread(cells.get((l, h), []))[0] for h in range(heads)] for l in range(layers)]
        out.append((path, rows[0]["variant"], len(seeds), grid))
    return out


def attention_grids(paths):
    out = []
    for path in paths:
        rows = read_rows(path)
        if not rows:
            continue
        t = 1 + max(int(r["query"]) for r in rows)
        grid = [[math.nan] * t for _ in range(t)]
        for r in rows:
            grid[int(r["query"])][int(r["key"])] = number(r["weight"])
        out.append((path, rows[0]["variant"], rows[0]["layer"], rows[0]["seed"], grid))
    return out


def scale_of(grids):
    values = [v for g in grids for row in g for v in row if math.isfinite(v)]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    return (lo - 0.5, hi + 0.5) if hi == lo else (lo, hi)


def heatmap(base, title, grid, xlabel, ylabel, label, vmin, vmax, values_in_cells):
    rows, cols = len(grid), len(grid[0])
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("lightgrey")
    masked = [[v if math.isfinite(v) else math.nan for v in row] for row in grid]
    width = min(10, max(4, 0.6 * cols + 2)) if values_in_cells else 6
    height = min(10, max(3, 0.5 * rows + 1.5)) if values_in_cells else 5.2
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(masked, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(label)
    if values_in_cells:
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        for r in range(rows):
            for c in range(cols):
                v = grid[r][c]
                if not math.isfinite(v):
                    continue
                shade = (v - vmin) / (vmax - vmin) if vmax > vmin else 0.5
                ax.text(c, r, f"{v:.3g}", ha="center", va="center", fontsize=8,
                        color="black" if shade > 0.6 else "white")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    save(fig, base)


def weight_sum_figure(path, base):
    rows = read_rows(path)
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    seeds = set()
    for i, (variant, vrows) in enumerate(by_variant(rows).items()):
        bins = OrderedDict()
        for r in vrows:
            seeds.add(r["seed"])
            b = int(r["bin"])
            lo_, hi_, count = number(r["bin_lo"]), number(r["bin_hi"]), int(r["count"])
            prev = bins.get(b, (lo_, hi_, 0))
            bins[b] = (lo_, hi_, prev[2] + count)
        order = sorted(bins)
        total = sum(bins[b][2] for b in order)
        edges = [bins[order[0]][0]] + [bins[b][1] for b in order]
        fractions = [bins[b][2] / total if total else 0.0 for b in order]
        ax.stairs(fractions, edges, color=f"C{i % 10}", label=variant, linewidth=1.5)
    n = len(seeds)
    ax.set_title("Per-query weight sum" + (f" ({n} seeds pooled)" if n > 1 else ""))
    ax.set_xlabel(r"$\sum_j A_{ij}$")
    ax.set_ylabel("fraction of queries")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, base)
    return True


def render(run_dir):
    names = sorted(f[:-4] for f in os.listdir(run_dir) if f.endswith(".csv"))
    drawn = []
    for name in list(PER_STEP) + list(PER_LAYER):
        if name in names:
            title, ylabel = PER_STEP.get(name) or PER_LAYER[name]
            if line_figure(os.path.join(run_dir, name + ".csv"), os.path.join(run_dir, name), title, ylabel,
                           name in PER_STEP):
                drawn.append(name)
    alphas = alpha_grids([os.path.join(run_dir, n + ".csv") for n in names if n.startswith("alpha_")])
    vmin, vmax = scale_of([g for *_, g in alphas])
    for path, variant, seeds, grid in alphas:
        note = f", mean of {seeds} seeds" if seeds > 1 else ""
        heatmap(path[:-4], f"alpha: {variant}{note}", grid, "head", "layer", "mean alpha", vmin, vmax, True)
        drawn.append(os.path.basename(path)[:-4])
    if "weight_sum_hist" in names and weight_sum_figure(os.path.join(run_dir, "weight_sum_hist.csv"),
                                                        os.path.join(run_dir, "weight_sum_hist")):
        drawn.append("weight_sum_hist")
    attentions = attention_grids([os.path.join(run_dir, n + ".csv") for n in names if n.startswith("attention_")])
    vmin, vmax = scale_of([g for *_, g in attentions])
    for path, variant, layer, seed, grid in attentions:
        heatmap(path[:-4], f"A: {variant}, layer {layer}, seed {seed}", grid, "key j", "query i",
                r"$A_{ij}$, mean over heads", vmin, vmax, False)
        drawn.append(os.path.basename(path)[:-4])
    return drawn


def main(argv):
    if len(argv) != 1:
        print("usage: plot_figures.py RUN_DIR", file=sys.stderr)
        return 2
    run_dir = argv[0]
    if not os.path.isdir(run_dir):
        print(f"plot: {run_dir}: not a directory", file=sys.stderr)
        return 1
    drawn = render(run_dir)
    if not drawn:
        print(f"plot: {run_dir} holds no figure CSVs (kd_loss.csv, alpha_<variant>.csv, ...)", file=sys.stderr)
        return 1
    print(f"figures: {len(drawn)} drawn with matplotlib {matplotlib.__version__} in {run_dir} "
          f"({', '.join(FORMATS).upper()}): {', '.join(drawn)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
