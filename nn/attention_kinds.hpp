// The attention kinds as data. One row per kind gives its name, the core the attention runs
// (tensor/core_kind.hpp), whether the layer gates the core's output, the parameters the kind adds
// under self_attn (name, shape in the layer's sizes, initial value), and its help text. Config
// parsing and its errors, the command line's help, `cotan params`, the study's variants and the
// tests all read this table; nothing else lists the kinds.
//
// A kind that changes only the layer (as gated does) is an enum value and a row here, plus, when
// it needs behaviour no row field describes yet, a field here and its use in Attention::apply
// (nn/layers.cpp). README.md, "Adding an attention kind", lists the steps.
//
// Buffers are not listed: an affine core implies the buffer alpha_ma [H] (starts at 0).
#pragma once

#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/params.hpp"
#include "tensor/core_kind.hpp"
#include "tensor/shape.hpp"

namespace cotan::nn {

enum class AttentionKind : uint8_t { softmax, sink, affine, gated, affine_gated };

// The sizes a parameter's shape is written in: D (hidden size), H (query heads), H d (query
// heads times the head dim); `none` ends a shape of rank 1.
enum class LayerDim : uint8_t { none, model, heads, heads_x_head_dim };

struct AttentionSizes {
  int64_t model = 0, heads = 0, head_dim = 0;
};

// A parameter a kind adds to the attention layer, under its prefix (model.layers.N.self_attn).
struct ExtraParam {
  std::string_view name;  // "alpha_proj.weight"
  LayerDim rows = LayerDim::none, cols = LayerDim::none;
  Init init = Init::normal;  // normal: N(0, init_std), like every matrix
  bool decay = true;         // weight decay applies
  std::string_view meaning;  // its role in the layer, for help texts
};

inline constexpr ExtraParam kAlphaProj{"alpha_proj.weight", LayerDim::heads, LayerDim::model, Init::normal, true,
                                       "z = x W_alpha^T [B, T, H], alpha = phi(z)"};
inline constexpr ExtraParam kSinks{"sinks", LayerDim::heads, LayerDim::none, Init::zeros, false,
                                   "the sink logit sigma_h, in the softmax normaliser only"};
inline constexpr ExtraParam kGateProj{"gate_proj.weight", LayerDim::heads_x_head_dim, LayerDim::model, Init::normal,
                                      true, "O' = O * sigmoid(x W_g^T), elementwise"};

// The parameter lists of the rows below, in declaration order (the order init_params draws them).
inline constexpr ExtraParam kSinkParams[] = {kSinks};
inline constexpr ExtraParam kAffineParams[] = {kAlphaProj};
inline constexpr ExtraParam kGatedParams[] = {kGateProj};
inline constexpr ExtraParam kAffineGatedParams[] = {kAlphaProj, kGateProj};

struct AttentionKindInfo {
  AttentionKind kind;
  std::string_view name;  // in config.json ("attention": {"kind": ...}) and on the command line
  CoreKind core;          // what the attention core computes from q, k, v
  bool gated;             // the layer multiplies the core's output by sigmoid(x W_g^T)
  std::span<const ExtraParam> params;
  bool study_each_phi;    // `cotan distill` runs one student per phi (linear_clip, sigmoid)
  std::string_view help;
};

// In enum order (checked below).
inline constexpr AttentionKindInfo kAttentionKinds[] = {
    {AttentionKind::softmax, "softmax", CoreKind::softmax, false, {}, false, "softmax attention, O = P V"},
    {AttentionKind::sink, "sink", CoreKind::sink, false, kSinkParams, false,
     "softmax with a learnable sink logit per head in the normaliser"},
    {AttentionKind::affine, "affine", CoreKind::affine, false, kAffineParams, true,
     "Affine-Scaled Attention, O = alpha S + beta U"},
    {AttentionKind::gated, "gated", CoreKind::softmax, true, kGatedParams, false,
     "softmax attention with a sigmoid output gate"},
    {AttentionKind::affine_gated, "affine_gated", CoreKind::affine, true, kAffineGatedParams, false,
     "affine attention with the output gate of gated"},
};

namespace detail {
constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kAttentionKinds); ++i)
    if (size_t(kAttentionKinds[i].kind) != i) return false;
  return true;
}
}  // namespace detail
static_assert(detail::rows_in_enum_order(), "kAttentionKinds must list the kinds in AttentionKind's order");

constexpr std::span<const AttentionKindInfo> attention_kinds() { return kAttentionKinds; }
constexpr const AttentionKindInfo& attention_kind(AttentionKind kind) { return kAttentionKinds[size_t(kind)]; }

inline std::string_view name_of(AttentionKind kind) { return attention_kind(kind).name; }
inline bool is_affine(AttentionKind kind) { return attention_kind(kind).core == CoreKind::affine; }
inline bool is_gated(AttentionKind kind) { return attention_kind(kind).gated; }

// Throws "[config] unknown attention kind 'x' (known: softmax, sink, affine, gated, affine_gated)".
AttentionKind parse_attention_kind(std::string_view text);
// "softmax, sink, affine, gated, affine_gated" with `separator` between the names.
std::string attention_kind_names(std::string_view separator = ", ");
// Per kind, a line with its name and help text, and a line with the parameters it adds (if any),
// each line starting with `indent`.
std::string attention_kinds_help(std::string_view indent = "  ");

// [rows] or [rows, cols] in the given sizes.
Shape shape_of(const ExtraParam& p, const AttentionSizes& sizes);
// "alpha_proj.weight [4, 128], normal init"
std::string describe(const ExtraParam& p, const AttentionSizes& sizes);
// "alpha_proj.weight [H, D]"
std::string describe(const ExtraParam& p);

}  // namespace cotan::nn
