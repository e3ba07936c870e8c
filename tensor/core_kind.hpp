// The kind of an attention core: which function of q, k and v the fused attention computes. The
// built-in layer-level kinds (nn/attention_kinds.hpp: softmax, sink, affine, gated, affine_gated)
// map onto these three; the gate is applied by the layer, outside the core. Kinds registered with
// a core of their own use none of them.
//   softmax: O = P V
//   sink:    O = P V with a learnable sink logit per head in the normaliser
//   affine:  O = alpha S + beta U (affine-scaled attention)
#pragma once

#include <cstdint>
#include <string_view>

namespace cotan {

enum class CoreKind : uint8_t { softmax, sink, affine };

constexpr std::string_view core_kind_name(CoreKind kind) {
  switch (kind) {
    case CoreKind::softmax: return "softmax";
    case CoreKind::sink: return "sink";
    case CoreKind::affine: return "affine";
  }
  return "?";
}

}  // namespace cotan
