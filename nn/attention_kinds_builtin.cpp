// The rows of the built-in kinds. Each runs the Backend path of Attention::apply (its `core` and
// `gated`); its composed and fused cores are the same function written against the registry's
// interface, CoreInputs -> O [B, H, T, d], and the gate stays with the layer as for every row.
#include "nn/attention.hpp"
#include "nn/attention_kinds.hpp"
#include "nn/config.hpp"
#include "nn/layers.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

namespace {

// The core of a built-in kind from its inputs: alpha = phi(x W_alpha^T) and the running average
// for affine cores (updated first in training passes), sigma for sink.
AttentionCoreFn builtin_core(CoreKind kind, bool fused) {
  return [kind, fused](const CoreInputs& in) {
    CoreResult out;
    AttentionCore core;
    core.q = in.q;
    core.k = in.k;
    core.v = in.v;
    core.affine_n = in.options.affine_n;
    if (kind == CoreKind::sink) core.sigma = in.ps[kSinks.name];
    if (kind == CoreKind::affine) {
      const Tensor z = matmul(in.x, transpose(in.ps[kAlphaProj.name]));  // [B, T, H]
      core.alpha = contiguous(permute(phi(z, in.options.phi), {0, 2, 1}));  // [B, H, T]
      core.alpha_ma = next_alpha_ma(in.buffer(kAlphaMa.name), core.alpha, in.options.rho, in.st.training);
      if (in.st.training) out.buffers[std::string(kAlphaMa.name)] = core.alpha_ma;
    }
    out.o = fused ? attention_fused(core) : attention_composed(core);
    return out;
  };
}

AttentionKindInfo builtin_row(std::string name, CoreKind core, bool gated, bool study_each_phi, std::string help) {
  AttentionKindInfo row;
  row.name = std::move(name);
  row.help = std::move(help);
  row.params = backend_params(core, gated);
  row.buffers = backend_buffers(core);
  row.composed = builtin_core(core, false);
  row.fused = builtin_core(core, true);
  row.study_each_phi = study_each_phi;
  row.core = core;
  row.gated = gated;
  return row;
}

}  // namespace

namespace detail {

std::vector<AttentionKindInfo> builtin_attention_kinds() {
  std::vector<AttentionKindInfo> rows;
  rows.push_back(builtin_row("softmax", CoreKind::softmax, false, false, "softmax attention, O = P V"));
  rows.push_back(builtin_row("sink", CoreKind::sink, false, false,
                             "softmax with a learnable sink logit per head in the normaliser"));
  rows.push_back(builtin_row("affine", CoreKind::affine, false, true, "Affine-Scaled Attention, O = alpha S + beta U"));
  rows.push_back(builtin_row("gated", CoreKind::softmax, true, false, "softmax attention with a sigmoid output gate"));
  rows.push_back(builtin_row("affine_gated", CoreKind::affine, true, false, "affine attention with the output gate of gated"));
  return rows;
}

}  // namespace detail

}  // namespace cotan::nn
