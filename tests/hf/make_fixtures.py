#!/usr/bin/env python3
"""Writes tests/hf/fixtures: tiny random models made and saved by HF transformers itself, with the
logits transformers computes for fixed ids, for tests/nn/test_hf_fixtures.cpp to compare cotan's
against without Python.

Run by hand, never in CI (it needs torch and transformers from PyPI):

    python3 -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install torch transformers safetensors
    /tmp/hfenv/bin/python tests/hf/make_fixtures.py

Each case directory holds what save_pretrained wrote (config.json in the transformers 5 spelling,
model.safetensors or shards with their index), config_v4.json (the same config in the
transformers 4 spelling: rope_theta and rope_scaling at the top, torch_dtype) and logits.json:

    {"ids": [[...], ...], "shape": [B, T, V], "f32": [...], "f64": [...]}

"f32" is HF's forward pass in float32. "f64" is its forward pass in float64 with the parts HF
keeps in float32 whatever the dtype (RMSNorm's variance, the RoPE tables, eager softmax) forced to
float64 here, so that the comparison in f64 can be tight. Cases whose config cotan must refuse
(the exact, erf-based GELU, a sliding window, a mixture of experts) hold config.json alone.
"""

import json
import math
import shutil
import sys
from pathlib import Path

import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, MixtralConfig,
                          Qwen2Config, Qwen2ForCausalLM)

OUT = Path(__file__).resolve().parent / "fixtures"
IDS = [[1, 5, 9, 2, 63, 17, 30, 8], [4, 4, 60, 11, 0, 42, 7, 19]]
SMALL = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)


def v4_spelling(config: dict) -> dict:
    """The transformers 4 spelling of a config that transformers 5 wrote."""
    old = {k: v for k, v in config.items() if k not in ("rope_parameters", "dtype")}
    rope = dict(config.get("rope_parameters") or {})
    old["rope_theta"] = rope.pop("rope_theta", 10000.0)
    old["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    if "dtype" in config:
        old["torch_dtype"] = config["dtype"]
    old["transformers_version"] = "4.46.0"
    return old


def inverse_frequencies_f64(config) -> torch.Tensor:
    """HF's rope_init functions (default, linear, llama3), computed in float64."""
    rope = dict(config.rope_parameters)
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    inv = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    kind = rope.get("rope_type", "default")
    if kind == "linear":
        inv = inv / rope["factor"]
    elif kind == "llama3":
        factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old_len = rope["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelen > old_len / low, inv / factor, torch.where(wavelen < old_len / high, inv, smoothed))
    elif kind != "default":
        raise ValueError(kind)
    return inv


def force_f64(model) -> None:
    """Runs the parts transformers keeps in float32 in float64 (see the module docstring)."""
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm"):
            def rms_forward(x, m=module):
                return m.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))
            module.forward = rms_forward
        elif name.endswith("RotaryEmbedding"):
            inv = inverse_frequencies_f64(model.config)

            def rope_forward(x, position_ids, inv=inv):
                freqs = position_ids[:, :, None].to(torch.float64) * inv[None, None, :]
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            module.forward = rope_forward


def logits_of(model, dtype) -> list:
    model = model.to(dtype)
    if dtype == torch.float64:
        force_f64(model)
    with torch.no_grad():
        out = model(torch.tensor(IDS)).logits
    return [float(v) for v in out.reshape(-1).tolist()]


def write_case(name: str, config_class, model_class, bf16: bool = False, shard: str = None, **fields) -> None:
    torch.manual_seed(sum(map(ord, name)))
    config = config_class(**SMALL, **fields)
    config._attn_implementation = "sdpa"
    model = model_class(config).eval()
    # Random weights well away from the init's tiny values, so every part of the math shows.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
        for module in model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                module.weight.copy_(1 + 0.1 * torch.randn_like(module.weight))
        model.lm_head.weight.mul_(0.2)  # logits of magnitude about 1 (tied: the embedding too)
        if bf16:  # the saved weights are bf16: the references run on the same rounded values
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    directory = OUT / name
    shutil.rmtree(directory, ignore_errors=True)
    saved = model.to(torch.bfloat16) if bf16 else model
    if shard:
        saved.save_pretrained(directory, max_shard_size=shard)
    else:
        saved.save_pretrained(directory)
    (directory / "generation_config.json").unlink(missing_ok=True)
    model = model.to(torch.float32)
    shape = [len(IDS), len(IDS[0]), config.vocab_size]
    reference = model_class(config).eval()
    reference.load_state_dict(model.state_dict())
    f32 = logits_of(reference, torch.float32)
    f64 = logits_of(reference, torch.float64)
    saved_config = json.loads((directory / "config.json").read_text())
    (directory / "config_v4.json").write_text(json.dumps(v4_spelling(saved_config), indent=2) + "\n")
    (directory / "logits.json").write_text(json.dumps({"ids": IDS, "shape": shape, "f32": f32, "f64": f64}) + "\n")
    print(f"{name}: {sorted(p.name for p in directory.iterdir())}")


def write_refused(name: str, config) -> None:
    directory = OUT / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    config.save_pretrained(directory)
    print(f"{name}: config.json only")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_case("llama_gqa", LlamaConfig, LlamaForCausalLM)
    write_case("llama_tied_llama3", LlamaConfig, LlamaForCausalLM, tie_word_embeddings=True,
               rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    write_case("llama_linear_bias", LlamaConfig, LlamaForCausalLM, attention_bias=True,
               rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})
    write_case("llama_head_dim", LlamaConfig, LlamaForCausalLM, head_dim=8)
    write_case("qwen2_tied", Qwen2Config, Qwen2ForCausalLM, tie_word_embeddings=True,
               rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    write_case("mistral", MistralConfig, MistralForCausalLM, sliding_window=None)
    write_case("llama_bf16", LlamaConfig, LlamaForCausalLM, bf16=True)
    write_case("llama_sharded", LlamaConfig, LlamaForCausalLM, shard="10KB")
    write_case("llama_gelu_mlp_bias", LlamaConfig, LlamaForCausalLM, hidden_act="gelu_pytorch_tanh", mlp_bias=True)
    write_refused("refused_gelu", LlamaConfig(**SMALL, hidden_act="gelu"))
    write_refused("refused_sliding_window", Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=4,
                                                         max_window_layers=0))
    write_refused("refused_mixtral", MixtralConfig(**SMALL))
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
