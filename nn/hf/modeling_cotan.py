# cotan's students with a non-softmax attention kind, for HF transformers' remote code:
#
#   AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)
#
# runs the kind's exact math, as cotan's docs/attention.md defines it, for the kinds whose core is
# one of cotan's three (KINDS below; a kind with a core of its own is refused, by name). cotan
# writes this file into every such model directory it exports, with configuration_cotan.py and an
# auto_map in config.json; without trust_remote_code transformers refuses the directory (its
# model_type, "cotan", is none of transformers' own), so no one runs it as plain softmax by mistake.
#
# The decoder is Llama's (Qwen2 and Mistral share it; Qwen2 adds q/k/v biases, Llama's
# attention_bias puts biases on q/k/v and o_proj). Each attention kind runs one of three cores,
# with or without an output gate (KINDS below); in every layer, with x the normed input:
#   softmax core  O_i = S_i = sum_j softmax_j(s_ij) v_j
#   sink core     L_i = log(exp(sigma_h) + sum_j exp(s_ij)),  O_i = sum_j exp(s_ij - L_i) v_j
#   affine core   alpha_i = phi(x_i . w_h),  beta_i = (alpha_ma_h - alpha_i) / N_i,
#                 O_i = alpha_i S_i + beta_i U_i  (U_i: sum of visible v_j)
#   gate          O' = O * sigmoid(x W_g^T), before o_proj
# phi is linear_clip, min(max(0.1 z + 0.5, 0), 1), or sigmoid; N_i is i + 1 (affine_n "visible")
# or T ("full"). alpha_ma is a buffer: in training mode each forward pass first sets
# alpha_ma <- rho alpha_ma + (1 - rho) mean(alpha); in evaluation mode it is read as it is.

import math

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_cotan import CotanConfig

# The attention kinds of the cotan program that exported this model, from its registry of kinds:
# each kind's core ("softmax", "sink" or "affine") and gate, or None for a kind that computes a
# core of its own, which this file cannot run. cotan fills in the table when it exports a model.
KINDS = {}


def inverse_frequencies(config) -> torch.Tensor:
    """RoPE inverse frequencies in float64 (default, linear or llama3 scaling), as cotan computes them."""
    d = config.head_dim
    inv = torch.tensor([1.0 / config.rope_theta ** (2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    scaling = config.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        inv = inv / scaling["factor"]
    elif kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_len = scaling["original_max_position_embeddings"]
        out = []
        for f in inv.tolist():
            wavelen = 2 * math.pi / f
            if wavelen > old_len / low:
                f = f / factor
            elif wavelen >= old_len / high:
                smooth = (old_len / wavelen - low) / (high - low)
                f = (1 - smooth) * f / factor + smooth * f
            out.append(f)
        inv = torch.tensor(out, dtype=torch.float64)
    elif kind not in ("default", None):
        raise ValueError(f"RoPE type {kind!r} is not supported")
    return inv


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class CotanRMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class CotanMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        bias = config.mlp_bias
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=bias)
        self.silu = config.hidden_act == "silu"

    def forward(self, x):
        g = self.gate_proj(x)
        act = nn.functional.silu(g) if self.silu else nn.functional.gelu(g, approximate="tanh")
        return self.down_proj(act * self.up_proj(x))


class CotanAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        a = config.attention
        self.kind = a.get("kind", "softmax")
        self.phi = a.get("phi", "linear_clip")
        self.rho = a.get("rho", 0.9)
        self.affine_n = a.get("affine_n", "visible")
        if self.kind not in KINDS:
            raise ValueError(f"unknown attention kind {self.kind!r} (the kinds cotan exported this file with: "
                             f"{', '.join(KINDS)})")
        if KINDS[self.kind] is None:
            runnable = ", ".join(name for name, spec in KINDS.items() if spec is not None)
            raise NotImplementedError(
                f"attention kind {self.kind!r} computes a core of its own, registered in the cotan program that "
                f"exported this model; this remote code has no definition of it (it runs {runnable}). The weights "
                f"and config.json are complete: load the directory with cotan, in a program that registers "
                f"{self.kind!r}.")
        self.core, self.gated = KINDS[self.kind]["core"], KINDS[self.kind]["gated"]
        self.heads, self.kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        qwen = config.base_model_type == "qwen2"
        qkv_bias, o_bias = qwen or config.attention_bias, (not qwen) and config.attention_bias
        d, h, hkv, hd = config.hidden_size, self.heads, self.kv_heads, self.head_dim
        self.q_proj = nn.Linear(d, h * hd, bias=qkv_bias)
        self.k_proj = nn.Linear(d, hkv * hd, bias=qkv_bias)
        self.v_proj = nn.Linear(d, hkv * hd, bias=qkv_bias)
        self.o_proj = nn.Linear(h * hd, d, bias=o_bias)
        if self.core == "sink":
            self.sinks = nn.Parameter(torch.zeros(h))
        if self.core == "affine":
            self.alpha_proj = nn.Linear(d, h, bias=False)
            self.register_buffer("alpha_ma", torch.zeros(h), persistent=True)
        if self.gated:
            self.gate_proj = nn.Linear(d, h * hd, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        visible = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
        if self.core == "sink":
            sigma = self.sinks.to(scores.dtype).view(1, -1, 1, 1).expand(b, -1, t, 1)
            log_norm = torch.logsumexp(torch.cat((scores, sigma), dim=-1), dim=-1, keepdim=True)
            o = torch.exp(scores - log_norm) @ v
        else:
            o = torch.softmax(scores, dim=-1) @ v
        if self.core == "affine":
            z = self.alpha_proj(x).transpose(1, 2)  # [B, H, T]
            alpha = torch.clamp(0.1 * z + 0.5, 0.0, 1.0) if self.phi == "linear_clip" else torch.sigmoid(z)
            if self.training:
                with torch.no_grad():
                    self.alpha_ma.mul_(self.rho).add_((1 - self.rho) * alpha.detach().mean(dim=(0, 2)).to(self.alpha_ma.dtype))
            positions = torch.arange(1, t + 1, dtype=o.dtype, device=x.device)
            n = positions if self.affine_n == "visible" else torch.full_like(positions, t)
            beta = (self.alpha_ma.to(o.dtype).view(1, -1, 1) - alpha) / n.view(1, 1, -1)
            o = alpha.unsqueeze(-1) * o + beta.unsqueeze(-1) * torch.cumsum(v, dim=2)
        o = o.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        if self.gated:
            o = o * torch.sigmoid(self.gate_proj(x))
        return self.o_proj(o)


class CotanDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = CotanRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = CotanAttention(config)
        self.post_attention_layernorm = CotanRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = CotanMLP(config)

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class CotanModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(CotanDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = CotanRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.config = config

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        t = input_ids.shape[1]
        # Computed here, not kept as a buffer: transformers builds models on the meta device and
        # would leave a non-persistent buffer unset.
        inv_freq = inverse_frequencies(self.config).to(input_ids.device)
        angles = torch.arange(t, dtype=torch.float64, device=input_ids.device)[:, None] * inv_freq[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class CotanForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = CotanConfig
    base_model_prefix = "model"
    _no_split_modules = ["CotanDecoderLayer"]

    def __init__(self, config):
        super().__init__(config)
        self.model = CotanModel(config)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, std)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()
        elif isinstance(module, CotanRMSNorm):
            module.weight.data.fill_(1.0)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        """No KV cache here: every step of generate() runs the whole sequence so far (cotan's own
        generation has a cache). transformers would otherwise pass only the newest token, expecting
        a cache this model does not keep, and the logits would lose their context."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, input_ids=None, labels=None, attention_mask=None, past_key_values=None, **kwargs):
        cached = past_key_values is not None and (
            past_key_values.get_seq_length() if hasattr(past_key_values, "get_seq_length") else len(past_key_values))
        if cached:
            raise ValueError("cotan's remote code keeps no KV cache: pass the whole sequence, without past_key_values")
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("cotan's remote code does not take padding: every row of the batch must be "
                             "as long as the others, with an attention_mask of ones")
        hidden = self.model(input_ids)
        head = self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight
        logits = hidden @ head.T
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return CausalLMOutputWithPast(loss=loss, logits=logits)
