#!/usr/bin/env python3
"""PyTorch reference timings for cotan's benchmarks (see BENCHMARKS.md).

`cotan bench matmul|attention|train|generate --torch` starts this script once and times PyTorch
in the same run as cotan, alternating the two call by call. Run it with the reference environment's
interpreter (bench/setup-reference.sh: PyTorch 2.x from PyPI, MKL and oneDNN) and the thread
counts set before it starts, as the benches do:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MKL_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        OPENBLAS_NUM_THREADS=2 ~/.cache/cotan/torchenv/bin/python bench/torch_reference.py \\
        matmul --sizes 1024 --threads 2

Modes:
  matmul [--sizes 256,512,1024,2048] [--dtypes f32,f64] [--layouts nn] [--repeat 10] [--warmup 2]
         [--threads 2]
      times torch.matmul of fresh random [m, k] x [k, n] operands (a size is N or MxNxK; a layout
      nn, nt with b transposed, tn with a transposed) and prints one JSON object: {<the header>,
      "results": [{"m", "n", "k", "layout", "dtype", "ms", "gflops"}]}, ms the median of
      --repeat runs after --warmup runs.
  serve [--threads 2]
      for cotan's benches: prints one JSON line, the header (below), or {"error"} when PyTorch
      cannot be imported; then answers each request line with one reply line:
        {"op": "matmul", "m", "n", "k", "dtype", "runs"[, "layout"]} -> {"seconds": [one time per
          run]}, layout "nn" (the default), "nt" (b transposed), "tn" (a transposed) or "tt",
          keeping the operands of the last shape between requests;
        {"op": "attention", "impl": "composed" | "sdpa", "kind", "causal", "affine_n", "inputs",
          "runs"} -> {"seconds", "max_relative_difference"}: forward + backward of the attention
          core on the tensors of the safetensors file `inputs` (written by cotan bench attention,
          with cotan's own results, which the first run is compared with);
        {"op": "train", "kind", "batch", "seq_len", "steps"[, "mode", "weights"]} -> {"seconds",
          "cpu_seconds", "losses", "grad_norms"}: distillation steps of torch_train_reference.py
          (same folder), eager or under torch.compile (mode "compiled"), whose models and
          optimizer are kept between requests;
        {"op": "generate", "model", "dtype", "prompts", "new_tokens", "runs"[, "mode"]} ->
          {"seconds", "tokens", "transformers", "graphs_compiled"}: HF transformers' greedy
          generate, with its KV cache, of exactly new_tokens tokens for each prompt (a list of
          ids; equal lengths, no padding), from the model directory `model` (loaded once, in dtype
          f32 or bf16); "tokens" are the last run's new ids per prompt. Mode "eager" (the default)
          runs the model as it is; "compiled" gives generate a static cache and its decoding
          steps to torch.compile (transformers' own compilation for static caches, which it does
          on GPUs by itself and on the CPU when asked; the prefill stays eager), and fails when
          transformers did not compile them. "graphs_compiled" counts the graphs torch.compile
          made during the request: 0 once it is warm. A model_type "cotan" directory (an
          exported student of another attention kind) loads with its own modeling code
          (trust_remote_code), which keeps no cache to compile against.
      An empty line or EOF ends it.

The header says what PyTorch runs on, read back from the process itself: {"torch", "blas" (one
line), "blas_info", "mkl", "onednn", "openblas_core", "openblas_config", "blas_library",
"cpu_capability", "threads" (torch.get_num_threads()), "interop_threads", "omp_threads",
"mkl_threads", "env" (the thread variables it was started with), "compile" (torch.compile
exists)}; a missing item is null. torch.__config__.show() names MKL and oneDNN; an OpenBLAS
build (Debian's torch) calls the system libblas, whose core is asked with openblas_get_corename().
"""

import argparse
import copy
import ctypes
import json
import math
import os
import re
import sys
import time

DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16"}


def blas_library():
    """The system BLAS shared library this process loaded (torch on Debian calls libblas.so.3), or
    None. numpy's wheels bring an OpenBLAS of their own (numpy.libs/libscipy_openblas*), which
    torch never calls: it is left out, so that it is not reported as torch's BLAS."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line}
    except OSError:
        return None
    paths = sorted(p for p in paths if "numpy.libs" not in p and "scipy_openblas" not in p)
    return paths[0] if paths else None


def import_torch(threads):
    import torch

    if threads > 0:
        try:  # only before any inter-op work has run
            torch.set_num_interop_threads(threads)
        except (RuntimeError, AttributeError):
            pass
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    torch.matmul(torch.ones(2, 2), torch.ones(2, 2))  # loads the BLAS
    return torch


def search(pattern, text):
    match = re.search(pattern, text)
    return match.group(1) if match else None


def openblas(library):
    """(core, config) of the OpenBLAS `library` is, or (None, None) for another BLAS."""
    try:
        lib = ctypes.CDLL(library)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode(), lib.openblas_get_config().decode().strip()
    except (OSError, AttributeError):
        return None, None


def operands(torch, m, n, k, dtype, layout="nn"):
    """[m, k] and [k, n] operands; layout "nt": b the transpose of a row-major [n, k] (x W^T),
    "tn": a the transpose of a row-major [k, m] (X^T G), "tt" both transposed."""
    if layout not in ("nn", "nt", "tn", "tt"):
        raise ValueError(f"unknown layout {layout!r}")
    dt = getattr(torch, DTYPES[dtype])
    a = torch.randn(k, m).to(dt).t() if layout[0] == "t" else torch.randn(m, k).to(dt)
    b = torch.randn(n, k).to(dt).t() if layout[1] == "t" else torch.randn(k, n).to(dt)
    return a, b


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
    show = torch.__config__.show()
    parallel = torch.__config__.parallel_info()
    mkl = search(r"Math Kernel Library Version ([\w.]+)", show)
    onednn = search(r"(?:MKL-DNN|oneDNN) v?([\d.]+)", show)
    blas_info = search(r"BLAS_INFO=(\w+)", show)
    # MKL is linked into libtorch itself; only another BLAS is a library of its own.
    library = blas_library() if blas_info != "mkl" else None
    core, config = openblas(library) if library else (None, None)
    if mkl:
        blas = f"MKL {mkl}"
    elif core:
        blas = f"{' '.join(config.split()[:2]) if config else 'OpenBLAS'} core {core}"  # "OpenBLAS 0.3.21 core Prescott"
    else:
        blas = blas_info or library or "unknown"
    if onednn:
        blas += f", oneDNN {onednn}"
    number = lambda pattern: int(search(pattern, parallel)) if search(pattern, parallel) else None
    return {"torch": torch.__version__, "blas": blas, "blas_info": blas_info, "mkl": mkl, "onednn": onednn,
            "openblas_core": core, "openblas_config": config, "blas_library": library,
            "cpu_capability": search(r"CPU capability usage: (\w+)", show),
            "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "omp_threads": number(r"omp_get_max_threads\(\) : (\d+)"),
            "mkl_threads": number(r"mkl_get_max_threads\(\) : (\d+)"),
            "env": {name: os.environ.get(name) for name in
                    ("MKL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")},
            "compile": hasattr(torch, "compile")}


def read_safetensors(path):
    from torch_train_reference import read_safetensors as read

    return read(path)


def repeat_kv(x, groups):
    """[B, Hkv, T, d] -> [B, Hkv * groups, T, d]: query head h reads kv head h // groups."""
    if groups == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, t, d).reshape(b, h * groups, t, d)


def attention_composed(torch, q, k, v, alpha=None, alpha_ma=None, sigma=None, causal=True, affine_n="visible"):
    """cotan's attention core (nn/attention.hpp) from ordinary eager ops, as nn/attention_composed.cpp
    builds it: softmax, sink (a per-head logit in the denominator only) and affine
    (alpha S + beta U, beta_i = (alpha_ma - alpha_i) / N_i, U_i the sum of the visible v_j)."""
    F = torch.nn.functional
    b, h, t, d = q.shape
    groups = h // k.shape[1]
    k, v = repeat_kv(k, groups), repeat_kv(v, groups)
    s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    if sigma is not None:
        sink = sigma.view(1, -1, 1, 1).expand(b, -1, t, 1)
        p = F.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = F.softmax(s, dim=-1)
    out = torch.matmul(p, v)
    if alpha is not None:
        n = torch.arange(1, t + 1, dtype=q.dtype) if causal and affine_n == "visible" else float(t)
        u = v.cumsum(dim=2) if causal else v.sum(dim=2, keepdim=True).expand_as(v)
        beta = (alpha_ma.view(1, -1, 1) - alpha) / n
        out = alpha.unsqueeze(-1) * out + beta.unsqueeze(-1) * u
    return out


class AttentionCase:
    """One kind and implementation on the tensors cotan wrote: q, k, v, cotangent, alpha,
    alpha_ma, sigma, and cotan's results <kind>.out and <kind>.grad.<i> (i over q, k, v, then
    alpha or sigma, the order of nn::differentiable_inputs)."""

    def __init__(self, torch, request):
        tensors = read_safetensors(request["inputs"])
        self.torch, self.kind, self.impl = torch, request["kind"], request["impl"]
        self.causal, self.affine_n = bool(request.get("causal", True)), request.get("affine_n", "visible")
        if self.impl == "sdpa" and self.kind != "softmax":
            raise ValueError(f"scaled_dot_product_attention has no {self.kind} kind")
        names = ["q", "k", "v"] + {"affine": ["alpha"], "sink": ["sigma"]}.get(self.kind, [])
        self.inputs = [tensors[n].clone().requires_grad_(True) for n in names]
        self.alpha_ma = tensors.get("alpha_ma") if self.kind == "affine" else None
        self.cotangent = tensors["cotangent"]
        out, grads = self.run()
        ours = [out] + grads
        theirs = [tensors.get(f"{self.kind}.out")] + [tensors.get(f"{self.kind}.grad.{i}") for i in range(len(grads))]
        self.difference = None
        if all(t is not None for t in theirs):
            self.difference = max(float((a.double() - b.double()).norm() / max(b.double().norm(), 1e-300))
                                  for a, b in zip(ours, theirs))

    def run(self):
        torch = self.torch
        for x in self.inputs:
            x.grad = None
        q, k, v = self.inputs[:3]
        if self.impl == "sdpa":
            groups = q.shape[1] // k.shape[1]
            try:
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                                                       enable_gqa=groups > 1)
            except TypeError:  # before enable_gqa (torch < 2.5)
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, repeat_kv(k, groups), repeat_kv(v, groups), is_causal=self.causal)
        else:
            extra = {"alpha": self.inputs[3], "alpha_ma": self.alpha_ma} if self.kind == "affine" else \
                {"sigma": self.inputs[3]} if self.kind == "sink" else {}
            out = attention_composed(torch, q, k, v, causal=self.causal, affine_n=self.affine_n, **extra)
        out.backward(self.cotangent)
        return out.detach(), [x.grad for x in self.inputs]

    def timed(self, runs):
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            self.run()
            seconds.append(time.perf_counter() - start)
        return {"seconds": seconds, "max_relative_difference": self.difference}


def run_matmul(args):
    torch = import_torch(args.threads)
    results = []
    for size in args.sizes.split(","):
        m, n, k = parse_size(size)
        for layout in args.layouts.split(","):
            for dtype in args.dtypes.split(","):
                a, b = operands(torch, m, n, k, dtype, layout)
                time_matmul(torch, a, b, args.warmup)
                seconds = sorted(time_matmul(torch, a, b, args.repeat))
                median = seconds[len(seconds) // 2]
                results.append({"m": m, "n": n, "k": k, "layout": layout, "dtype": dtype,
                                "ms": median * 1e3, "gflops": 2.0 * m * n * k / median / 1e9})
    print(json.dumps({**header(torch), "results": results}))


class GenerateCase:
    """One model directory loaded into transformers, for the "generate" requests."""

    def __init__(self, torch, model_dir, dtype):
        import transformers

        self.torch, self.transformers = torch, transformers
        transformers.utils.logging.disable_progress_bar()  # stderr is cotan's
        with open(os.path.join(model_dir, "config.json")) as f:
            remote = json.load(f).get("model_type") == "cotan"
        self.remote = remote
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=getattr(torch, DTYPES[dtype]), trust_remote_code=remote)
        self.model.eval()

    def timed(self, prompts, new_tokens, runs, mode="eager"):
        torch = self.torch
        if len({len(p) for p in prompts}) != 1:
            raise ValueError("generate: the prompts must have one length (no padding)")
        if mode not in ("eager", "compiled"):
            raise ValueError(f"generate: unknown mode {mode!r} (known: eager, compiled)")
        if mode == "compiled" and self.remote:
            raise ValueError("generate: an exported model_type 'cotan' student keeps no KV cache for torch.compile")
        ids = torch.tensor(prompts, dtype=torch.long)
        config = copy.deepcopy(self.model.generation_config)
        config.do_sample, config.num_beams, config.use_cache = False, 1, True
        config.max_new_tokens, config.min_new_tokens = new_tokens, None
        config.eos_token_id, config.pad_token_id = None, 0  # every row runs all its steps
        for name in ("temperature", "top_p", "top_k"):  # unused when greedy: no warnings
            setattr(config, name, None)
        if mode == "compiled":
            config.cache_implementation = "static"
            config.compile_config = self.transformers.CompileConfig(fullgraph=False, dynamic=False, mode="default")
            config.compile_config._compile_all_devices = True  # transformers' switch for compiling on the CPU
            config.disable_compile = False
        else:
            config.disable_compile = True
        counters = None
        try:
            from torch._dynamo.utils import counters
        except ImportError:
            pass
        graphs_before = counters["stats"]["unique_graphs"] if counters is not None else 0
        seconds, out = [], None
        for _ in range(runs):
            start = time.perf_counter()
            with torch.inference_mode():
                out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
            seconds.append(time.perf_counter() - start)
        new = out[:, ids.shape[1]:]
        if new.shape[1] != new_tokens:
            raise ValueError(f"generate: transformers produced {new.shape[1]} tokens, not {new_tokens}")
        if mode == "compiled" and new_tokens > 1 and not hasattr(self.model, "_compiled_call"):
            raise ValueError(f"generate: transformers {self.transformers.__version__} did not compile the decoding steps")
        graphs = counters["stats"]["unique_graphs"] - graphs_before if counters is not None else 0
        return {"seconds": seconds, "tokens": new.tolist(), "transformers": self.transformers.__version__,
                "graphs_compiled": graphs}


def serve(args):
    try:
        torch = import_torch(args.threads)
    except Exception as error:  # reported to cotan as one line, never a traceback
        print(json.dumps({"error": f"cannot import torch: {error}"}), flush=True)
        return
    print(json.dumps(header(torch)), flush=True)
    key, a, b = None, None, None
    attention = {}  # (inputs, kind, impl, causal, affine_n) -> AttentionCase
    generate = {}  # (model, dtype) -> GenerateCase
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            request = json.loads(line)
            if request.get("op") == "train":
                from torch_train_reference import serve_train  # imported on first use: it imports torch

                reply = serve_train(request)
            elif request.get("op") == "attention":
                case = (request["inputs"], request["kind"], request["impl"], request.get("causal", True),
                        request.get("affine_n", "visible"))
                if case not in attention:
                    attention[case] = AttentionCase(torch, request)
                reply = attention[case].timed(int(request.get("runs", 1)))
            elif request.get("op") == "generate":
                case = (request["model"], request.get("dtype", "f32"))
                if case not in generate:
                    generate.clear()  # one model in memory at a time
                    generate[case] = GenerateCase(torch, *case)
                reply = generate[case].timed(request["prompts"], int(request["new_tokens"]),
                                             int(request.get("runs", 1)), request.get("mode", "eager"))
            elif request.get("op") == "matmul":
                shape = (request["m"], request["n"], request["k"], request["dtype"],
                         request.get("layout", "nn"))
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
    matmul.add_argument("--layouts", default="nn", help="nn, nt (b transposed), tn (a transposed)")
    matmul.add_argument("--repeat", type=int, default=10)
    matmul.add_argument("--warmup", type=int, default=2)
    matmul.add_argument("--threads", type=int, default=2, help="torch threads (0: torch's default)")
    server = modes.add_parser("serve", help="answer timing requests on stdin (used by cotan bench)")
    server.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run_matmul(args) if args.mode == "matmul" else serve(args)


if __name__ == "__main__":
    main()
