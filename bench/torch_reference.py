#!/usr/bin/python3
"""PyTorch reference timings for cotan's benchmarks (see BENCHMARKS.md).

`cotan bench matmul --torch` starts this script once and times PyTorch in the same run as cotan,
alternating the two call by call. Run it with Debian's interpreter and OpenBLAS's own kernel
choice, as the bench does:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/torch_reference.py \\
        matmul --sizes 1024 --threads 2

Modes:
  matmul [--sizes 256,512,1024,2048] [--dtypes f32,f64] [--repeat 10] [--warmup 2] [--threads 2]
      times torch.matmul of fresh random [m, k] x [k, n] operands (a size is N or MxNxK) and
      prints one JSON object: {"torch", "blas", "threads", "results": [{"m", "n", "k", "dtype",
      "ms", "gflops"}]}, ms the median of --repeat runs after --warmup runs.
  serve [--threads 2]
      for cotan's benches: prints one JSON line {"torch", "blas", "threads"} (or {"error"} when
      PyTorch cannot be imported), then answers each request line
      {"op": "matmul", "m", "n", "k", "dtype", "runs"} with {"seconds": [one time per run]},
      keeping the operands of the last shape between requests; and
      {"op": "train", "kind", "batch", "seq_len", "steps"[, "weights"]} with {"seconds", "cpu_seconds",
      "losses", "grad_norms"}: timed distillation steps of torch_train_reference.py (same folder), whose
      models and optimizer are kept between requests. An empty line or EOF ends it.
"""

import argparse
import json
import sys
import time

DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16"}


def blas_library():
    """The BLAS shared library this process loaded (torch on Debian calls the system libblas)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line}
        return sorted(paths)[0] if paths else "unknown"
    except OSError:
        return "unknown"


def import_torch(threads):
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    torch.matmul(torch.ones(2, 2), torch.ones(2, 2))  # loads the BLAS
    return torch


def operands(torch, m, n, k, dtype):
    dt = getattr(torch, DTYPES[dtype])
    return torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)


def time_matmul(torch, a, b, runs):
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        torch.matmul(a, b)
        seconds.append(time.perf_counter() - start)
    return seconds


def parse_size(text):
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return parts * 3
    if len(parts) == 3:
        return parts
    raise ValueError(f"size '{text}' is neither N nor MxNxK")


def header(torch):
    return {"torch": torch.__version__, "blas": blas_library(), "threads": torch.get_num_threads()}


def run_matmul(args):
    torch = import_torch(args.threads)
    results = []
    for size in args.sizes.split(","):
        m, n, k = parse_size(size)
        for dtype in args.dtypes.split(","):
            a, b = operands(torch, m, n, k, dtype)
            time_matmul(torch, a, b, args.warmup)
            seconds = sorted(time_matmul(torch, a, b, args.repeat))
            median = seconds[len(seconds) // 2]
            results.append({"m": m, "n": n, "k": k, "dtype": dtype, "ms": median * 1e3,
                            "gflops": 2.0 * m * n * k / median / 1e9})
    print(json.dumps({**header(torch), "results": results}))


def serve(args):
    try:
        torch = import_torch(args.threads)
    except Exception as error:  # reported to cotan as one line, never a traceback
        print(json.dumps({"error": f"cannot import torch: {error}"}), flush=True)
        return
    print(json.dumps(header(torch)), flush=True)
    key, a, b = None, None, None
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            request = json.loads(line)
            if request.get("op") == "train":
                from torch_train_reference import serve_train

                reply = serve_train(request)
            elif request.get("op") == "matmul":
                shape = (request["m"], request["n"], request["k"], request["dtype"])
                if shape != key:
                    key, (a, b) = shape, operands(torch, *shape)
                reply = {"seconds": time_matmul(torch, a, b, int(request.get("runs", 1)))}
            else:
                raise ValueError(f"unknown op {request.get('op')!r}")
        except Exception as error:
            reply = {"error": str(error)}
        print(json.dumps(reply), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    matmul = modes.add_parser("matmul", help="time torch.matmul and print JSON")
    matmul.add_argument("--sizes", default="256,512,1024,2048")
    matmul.add_argument("--dtypes", default="f32,f64")
    matmul.add_argument("--repeat", type=int, default=10)
    matmul.add_argument("--warmup", type=int, default=2)
    matmul.add_argument("--threads", type=int, default=2, help="torch threads (0: torch's default)")
    server = modes.add_parser("serve", help="answer timing requests on stdin (used by cotan bench)")
    server.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run_matmul(args) if args.mode == "matmul" else serve(args)


if __name__ == "__main__":
    main()
