# The configuration of cotan's students with a non-softmax attention kind, for HF transformers'
# remote code (AutoConfig.from_pretrained(dir, trust_remote_code=True)). cotan writes this file
# into every such model directory it exports; the math lives in modeling_cotan.py beside it.
#
# The fields are those of the base family's config.json (base_model_type: llama, qwen2 or
# mistral; rope_theta and rope_scaling as transformers 4 writes them) plus cotan's "attention"
# object: {"kind": a name from modeling_cotan.py's KINDS ("sink", "affine", ...), "phi":
# "linear_clip" | "sigmoid", "rho": 0.9, "affine_n": "visible" | "full"}.

from transformers import PretrainedConfig


class CotanConfig(PretrainedConfig):
    model_type = "cotan"

    def __init__(self, vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, head_dim=None, max_position_embeddings=2048,
                 rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None, attention_bias=False,
                 base_model_type="llama", attention=None, initializer_range=0.02, tie_word_embeddings=False,
                 hidden_act="silu", mlp_bias=False, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.attention_bias = attention_bias
        self.base_model_type = base_model_type
        self.attention = dict(attention or {})
        self.initializer_range = initializer_range
        self.hidden_act = hidden_act
        self.mlp_bias = mlp_bias
        if hidden_act not in ("silu", "gelu_pytorch_tanh", "gelu_new"):
            raise ValueError(f"cotan models use silu or the tanh GELU, not {hidden_act}")
        if base_model_type not in ("llama", "qwen2", "mistral"):
            raise ValueError(f"unknown base_model_type {base_model_type!r}")
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
