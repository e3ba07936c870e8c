#!/usr/bin/env python3
"""An eager PyTorch version of cotan's distillation step, for `cotan bench train --torch`.

The models are Llama-style decoders written the way eager PyTorch code usually is (HF
transformers' eager LlamaAttention of the torch 1.x era): embedding, RMSNorm, RoPE on split
halves, GQA through repeat_kv, SwiGLU and an untied head, with the attention kinds of
docs/attention.md, composed from ordinary ops (softmax, sink, affine, gated, affine_gated; the
same code runs on torch 1.13, which has no F.scaled_dot_product_attention). One training step is:

    teacher logits under torch.no_grad (evaluation mode, frozen)
    student forward, fkl KD loss (F.kl_div on log-softmaxes, tau^2 / tokens), backward
    torch.nn.utils.clip_grad_norm_(1.0), torch.optim.AdamW (weight decay on matrices only)

all in f32 on the CPU. Parameter names are the HF names cotan uses, so cotan's weights load
as they are (load_safetensors), and the same weights and batch give the same losses.

The "compiled" mode runs the teacher's and student's forward passes and the loss under
torch.compile (inductor, which needs a C++ compiler; its cache lives in /tmp/torchinductor_$USER),
the backward through the compiled graph's own backward, and the same eager clipping and AdamW.
The first step compiles; time it only after a few warm-up steps.

Standalone, with the reference environment's interpreter (bench/setup-reference.sh) and the
thread counts in the environment (BENCHMARKS.md):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MKL_NUM_THREADS=2 OMP_NUM_THREADS=2 \\
        OPENBLAS_NUM_THREADS=2 ~/.cache/cotan/torchenv/bin/python bench/torch_train_reference.py \\
        --kind affine --batch 8 --seq-len 128 --steps 10 --threads 2 [--compile]

prints one JSON object {"torch", "threads", "kind", "mode", "batch", "seq_len", "ms", "tokens_per_s"}.
On a busy machine add OMP_WAIT_POLICY=PASSIVE to the environment (see app/bench_train.cpp):
spinning idle workers cost PyTorch most of its time when there are more runnable threads than
cores.
"""

import argparse
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

# docs/models.md and nn/config.cpp: the tiny pair of the default recipe.
PRESETS = {
    "tiny-teacher": dict(hidden=192, layers=4, heads=6, kv_heads=2, inter=512, vocab=257, theta=1e4, eps=1e-5,
                         tied=False),
    "tiny-student": dict(hidden=128, layers=2, heads=4, kv_heads=2, inter=384, vocab=257, theta=1e4, eps=1e-5,
                         tied=False),
}
KINDS = ("softmax", "sink", "affine", "gated", "affine_gated")
INIT_STD = 0.02
RHO = 0.9


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(seq_len, head_dim, theta):
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # both halves use the same angle
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, groups):
    """[B, Hkv, T, d] -> [B, Hkv * groups, T, d]: query head h reads kv head h // groups."""
    if groups == 1:
        return x
    b, h, t, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, t, d).reshape(b, h * groups, t, d)


class Attention(nn.Module):
    def __init__(self, c, kind, phi):
        super().__init__()
        self.heads, self.kv_heads = c["heads"], c["kv_heads"]
        self.head_dim = c["hidden"] // c["heads"]
        self.kind, self.phi = kind, phi
        hidden, inner = c["hidden"], c["heads"] * self.head_dim
        self.q_proj = nn.Linear(hidden, inner, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(inner, hidden, bias=False)
        if kind in ("affine", "affine_gated"):
            self.alpha_proj = nn.Linear(hidden, self.heads, bias=False)
            self.register_buffer("alpha_ma", torch.zeros(self.heads))
        if kind == "sink":
            self.sinks = nn.Parameter(torch.zeros(self.heads))
        if kind in ("gated", "affine_gated"):
            self.gate_proj = nn.Linear(hidden, inner, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)

        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
        if self.kind == "sink":  # the sink logit enters the denominator only
            sink = self.sinks.view(1, -1, 1, 1).expand(b, -1, t, 1)
            weights = F.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
        else:
            weights = F.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)  # S [B, H, T, d]

        if self.kind in ("affine", "affine_gated"):
            z = self.alpha_proj(x).transpose(1, 2)  # [B, H, T]
            alpha = torch.clamp(0.1 * z + 0.5, 0.0, 1.0) if self.phi == "linear_clip" else torch.sigmoid(z)
            if self.training:  # updated first, then used for this pass; no gradient
                with torch.no_grad():
                    self.alpha_ma.mul_(RHO).add_(alpha.mean(dim=(0, 2)), alpha=1.0 - RHO)
            visible = torch.arange(1, t + 1, dtype=x.dtype)  # N_i = i + 1 keys
            beta = (self.alpha_ma.view(1, -1, 1) - alpha) / visible
            out = alpha.unsqueeze(-1) * out + beta.unsqueeze(-1) * v.cumsum(dim=2)  # alpha S + beta U
        out = out.transpose(1, 2).reshape(b, t, -1)
        if self.kind in ("gated", "affine_gated"):
            out = out * torch.sigmoid(self.gate_proj(x))
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden"], c["inter"], bias=False)
        self.up_proj = nn.Linear(c["hidden"], c["inter"], bias=False)
        self.down_proj = nn.Linear(c["inter"], c["hidden"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c, kind, phi):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.self_attn = Attention(c, kind, phi)
        self.post_attention_layernorm = RMSNorm(c["hidden"], c["eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, c, kind, phi):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(DecoderLayer(c, kind, phi) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"], c["eps"])


class CausalLM(nn.Module):
    def __init__(self, preset, kind="softmax", phi="linear_clip"):
        super().__init__()
        c = PRESETS[preset]
        self.config = c
        self.model = Decoder(c, kind, phi)
        self.lm_head = None if c["tied"] else nn.Linear(c["hidden"], c["vocab"], bias=False)
        self.tables = {}  # seq_len -> (cos, sin, causal mask), as HF caches its rotary tables
        for name, p in self.named_parameters():  # cotan's init: matrices normal(0, 0.02)
            if p.dim() == 2:
                nn.init.normal_(p, std=INIT_STD)

    def prepare(self, t):
        """Makes the tables for sequences of t tokens (before torch.compile traces forward)."""
        if t not in self.tables:
            cos, sin = rope_tables(t, self.config["hidden"] // self.config["heads"], self.config["theta"])
            mask = torch.full((t, t), float("-inf")).triu(1)
            self.tables[t] = (cos, sin, mask)
        return self.tables[t]

    def forward(self, ids):
        cos, sin, mask = self.prepare(ids.shape[1])
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, head)


def kd_fkl(student_logits, teacher_logits, temperature=1.0):
    """tau^2 KL(p || q) per token, averaged over tokens (docs/losses.md, kd_ratio = 1)."""
    v = student_logits.shape[-1]
    log_q = F.log_softmax(student_logits.reshape(-1, v) / temperature, dim=-1)
    log_p = F.log_softmax(teacher_logits.reshape(-1, v) / temperature, dim=-1)
    return F.kl_div(log_q, log_p, reduction="batchmean", log_target=True) * temperature ** 2


def adamw(model, lr=1e-3):
    """cotan's AdamWConfig defaults; weight decay on matrices only (not norms, biases, sinks)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def read_safetensors(path):
    """name -> tensor for the f32 / i64 / i32 tensors of a safetensors file."""
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).clone()
    return out


class Trainer:
    """The frozen teacher, the student, its optimizer and one fixed batch."""

    def __init__(self, kind, batch, seq_len, phi="linear_clip", clip=1.0, lr=1e-3, temperature=1.0, weights=None,
                 seed=0, mode="eager"):
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r} (known: {', '.join(KINDS)})")
        torch.manual_seed(seed)
        self.teacher = CausalLM("tiny-teacher").eval().requires_grad_(False)
        self.student = CausalLM("tiny-student", kind, phi).train()
        self.inputs = torch.randint(0, PRESETS["tiny-student"]["vocab"], (batch, seq_len))
        if weights:  # cotan's initial weights and batch: the same losses, step by step
            self.teacher.load_state_dict(read_safetensors(weights["teacher"]), strict=False)
            self.student.load_state_dict(read_safetensors(weights["student"]), strict=False)
            self.inputs = read_safetensors(weights["batch"])["inputs"].long()
        self.optimizer = adamw(self.student, lr)
        self.clip, self.temperature = clip, temperature
        if mode not in ("eager", "compiled"):
            raise ValueError(f"unknown mode {mode!r} (known: eager, compiled)")
        self.loss = self.eager_loss
        if mode == "compiled":
            if not hasattr(torch, "compile"):
                raise ValueError(f"torch {torch.__version__} has no torch.compile")
            self.teacher.prepare(seq_len), self.student.prepare(seq_len)
            self.loss = torch.compile(self.eager_loss)

    def eager_loss(self, inputs):
        with torch.no_grad():
            teacher_logits = self.teacher(inputs)
        return kd_fkl(self.student(inputs), teacher_logits, self.temperature)

    def step(self):
        """One optimizer step; returns (loss, grad norm before clipping)."""
        loss = self.loss(self.inputs)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.student.parameters(), self.clip)
        self.optimizer.step()
        return loss.item(), norm.item()

    def timed_steps(self, steps):
        """Wall and process CPU seconds (all threads) of each step, its loss and gradient norm."""
        seconds, cpu_seconds, losses, norms = [], [], [], []
        for _ in range(steps):
            start, cpu_start = time.perf_counter(), time.process_time()
            loss, norm = self.step()
            seconds.append(time.perf_counter() - start)
            cpu_seconds.append(time.process_time() - cpu_start)
            losses.append(loss)
            norms.append(norm)
        return {"seconds": seconds, "cpu_seconds": cpu_seconds, "losses": losses, "grad_norms": norms}


_trainers = {}


def serve_train(request):
    """A `serve` request {"op": "train", "kind", "batch", "seq_len", "steps"[, "phi", "mode",
    "weights"]} (mode: eager or compiled; weights: {"teacher", "student", "batch"} safetensors
    paths) runs `steps` timed steps on a trainer kept between requests of the same settings."""
    phi, mode = request.get("phi", "linear_clip"), request.get("mode", "eager")
    key = (request["kind"], phi, mode, request["batch"], request["seq_len"], json.dumps(request.get("weights")))
    if key not in _trainers:
        _trainers[key] = Trainer(request["kind"], request["batch"], request["seq_len"], phi,
                                 weights=request.get("weights"), mode=mode)
    return _trainers[key].timed_steps(int(request.get("steps", 1)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", default="affine", choices=KINDS)
    parser.add_argument("--phi", default="linear_clip", choices=("linear_clip", "sigmoid"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="the forward passes and loss under torch.compile")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    mode = "compiled" if args.compile else "eager"
    trainer = Trainer(args.kind, args.batch, args.seq_len, args.phi, mode=mode)
    trainer.timed_steps(args.warmup)
    median = statistics.median(trainer.timed_steps(args.steps)["seconds"])
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "kind": args.kind,
                      "mode": mode, "batch": args.batch, "seq_len": args.seq_len, "ms": median * 1e3,
                      "tokens_per_s": args.batch * args.seq_len / median}))


if __name__ == "__main__":
    sys.exit(main())
