// The attention kinds as data: one registry whose rows the built-in kinds (softmax, sink, affine,
// gated, affine_gated) and the kinds user code registers share. A row gives
//   name            in config.json ("attention": {"kind": ...}) and on the command line
//   params          what the kind adds under model.layers.N.self_attn (name, shape in the
//                   layer's sizes, init, weight decay)
//   buffers         what it keeps in State (name, shape, initial value, its training update)
//   composed        its core from differentiable ops: q, k, v after RoPE, the normed input x,
//                   the layer's parameters and State -> O [B, H, T, d] and the buffers' updates
//   fused           optional: a faster core of the same function (impl fused)
//   cached_step     optional: the core on new tokens against the KV cache (CausalLM::prefill,
//                   extend, decode_step; without it generation recomputes whole sequences)
//   core, gated     the built-in kinds' path: one of the Backend's attention kernels (CoreKind),
//                   the output gate, and their cached decoding (Attention::apply and extend)
// Config parsing and its errors, the command line's help, `cotan params`, the study's variants,
// the exported remote code's table of kinds and the tests all read the registry; nothing else
// lists the kinds.
//
// A kind from user code, registered once (at static initialisation or in main; thread-safe):
//
//   const nn::AttentionKind kTemperature = nn::register_attention_kind({
//       .name = "temperature",
//       .help = "softmax attention with a learned temperature per head",
//       .params = {{"temperature", nn::LayerDim::heads, nn::LayerDim::none, nn::Init::ones, false,
//                   "scales head h's scores"}},
//       .composed = [](const nn::CoreInputs& in) -> nn::CoreResult {
//         const Tensor t = reshape(in.ps["temperature"], {1, -1, 1, 1});  // [1, H, 1, 1]
//         return {nn::attention_composed({.q = in.q * t, .k = in.k, .v = in.v})};
//       }});
//
// README.md, "Adding an attention kind", has the whole story (decoding, export, tests).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/params.hpp"
#include "tensor/core_kind.hpp"
#include "tensor/shape.hpp"

namespace cotan::nn {

struct AttentionConfig;  // nn/config.hpp

// A registered kind: an index into the registry. The built-ins keep their names as constants
// (AttentionKind::softmax ...); a default-constructed kind is softmax.
class AttentionKind {
 public:
  constexpr AttentionKind() = default;
  constexpr explicit AttentionKind(uint16_t index) : index_(index) {}
  constexpr uint16_t index() const { return index_; }
  constexpr bool operator==(const AttentionKind&) const = default;

  static const AttentionKind softmax, sink, affine, gated, affine_gated;

 private:
  uint16_t index_ = 0;
};

inline constexpr AttentionKind AttentionKind::softmax{0};
inline constexpr AttentionKind AttentionKind::sink{1};
inline constexpr AttentionKind AttentionKind::affine{2};
inline constexpr AttentionKind AttentionKind::gated{3};
inline constexpr AttentionKind AttentionKind::affine_gated{4};

std::ostream& operator<<(std::ostream& out, AttentionKind kind);  // its name

// The sizes a parameter's or buffer's shape is written in: D (hidden size), H (query heads), Hkv
// (key/value heads), d (head dim) and the products H d and Hkv d; `none` ends a shape of rank 1.
enum class LayerDim : uint8_t { none, model, heads, heads_x_head_dim, kv_heads, head_dim, kv_heads_x_head_dim };

struct AttentionSizes {
  int64_t model = 0, heads = 0, head_dim = 0, kv_heads = 0;
};

// A parameter a kind adds to the attention layer, under its prefix (model.layers.N.self_attn).
struct ExtraParam {
  std::string name;  // "alpha_proj.weight"
  LayerDim rows = LayerDim::none, cols = LayerDim::none;
  Init init = Init::normal;  // normal: N(0, init_std), like every matrix
  bool decay = true;         // weight decay applies
  std::string meaning;       // its role in the layer, for help texts
};

// A buffer a kind keeps in State, under the layer's prefix: a constant of the forward pass (no
// gradient), which training passes may replace (the core returns its next value) and evaluation
// passes leave as it is.
struct KindBuffer {
  std::string name;  // "alpha_ma"
  LayerDim rows = LayerDim::heads, cols = LayerDim::none;
  double initial = 0;   // every element starts here
  std::string update;   // what a training pass does to it, for help texts
};

// The parameters and buffer of the built-in kinds, as constants: literal types, which no
// initialisation order can catch half-built, that convert to the rows' ExtraParam and KindBuffer.
struct BuiltinParam {
  std::string_view name;
  LayerDim rows, cols;
  Init init;
  bool decay;
  std::string_view meaning;
  operator ExtraParam() const { return {std::string(name), rows, cols, init, decay, std::string(meaning)}; }
};

struct BuiltinBuffer {
  std::string_view name;
  LayerDim rows, cols;
  double initial;
  std::string_view update;
  operator KindBuffer() const { return {std::string(name), rows, cols, initial, std::string(update)}; }
};

inline constexpr BuiltinParam kAlphaProj{"alpha_proj.weight", LayerDim::heads, LayerDim::model, Init::normal, true,
                                         "z = x W_alpha^T [B, T, H], alpha = phi(z)"};
inline constexpr BuiltinParam kSinks{"sinks", LayerDim::heads, LayerDim::none, Init::zeros, false,
                                     "the sink logit sigma_h, in the softmax normaliser only"};
inline constexpr BuiltinParam kGateProj{"gate_proj.weight", LayerDim::heads_x_head_dim, LayerDim::model, Init::normal,
                                        true, "O' = O * sigmoid(x W_g^T), elementwise"};
inline constexpr BuiltinBuffer kAlphaMa{"alpha_ma", LayerDim::heads, LayerDim::none, 0.0,
                                        "alpha_ma <- rho alpha_ma + (1 - rho) mean of alpha over b and t, before use"};

// What a kind's hooks read besides their tensors.
struct KindContext {
  ParamView ps;                    // the layer's parameters, at its prefix: ps["temperature"]
  const State& st;                 // st.training: a training pass (evaluation freezes the buffers)
  std::string prefix;              // "model.layers.3.self_attn": where the layer's buffers sit in st
  const AttentionConfig& options;  // the model's attention options (phi, rho, affine_n, impl)
  // The kind's buffer `name` of this layer; throws "[attention] state has no buffer '<prefix>.<name>'".
  const Tensor& buffer(std::string_view name) const;
};

// The core's inputs, one layer of one pass. H % Hkv == 0: query head h reads kv head h / (H / Hkv).
struct CoreInputs : KindContext {
  Tensor q;     // [B, H, T, d], after RoPE
  Tensor k, v;  // [B, Hkv, T, d], k after RoPE (v may be a strided view)
  Tensor x;     // [B, T, D], the normed layer input the projections read
};

struct CoreResult {
  Tensor o;  // [B, H, T, d], causal: position i reads positions j <= i only
  // The next values of the kind's buffers, by name (training passes only; the layer keeps the
  // first run's values under checkpoint(), see same_on_recompute in autograd/autograd.hpp).
  std::map<std::string, Tensor> buffers;
};

using AttentionCoreFn = std::function<CoreResult(const CoreInputs&)>;

// A decoding step's inputs: Tq new tokens per row against the layer's KV cache (nn/kv_cache.hpp),
// evaluation mode (buffers read, never updated), no gradients.
struct CachedStepInputs : KindContext {
  Tensor q;        // [B, H, Tq, d], the new tokens' queries after RoPE
  Tensor k, v;     // [B, Hkv, S, d], every slot of the cache, the Tq new ones last; k after RoPE
  Tensor visible;  // [B, S] bool: the slots that hold a token; new token i also sees only slots
                   // j <= S - Tq + i (nn::cached_attention applies both)
  Tensor count;    // [B, Tq] i64: the tokens new token i sees (its position + 1)
  Tensor x;        // [B, Tq, D], the normed layer input of the new tokens
};

using CachedStepFn = std::function<Tensor(const CachedStepInputs&)>;  // O [B, H, Tq, d]

struct AttentionKindInfo {
  std::string name;  // letters, digits and '_'
  std::string help;  // one line, for --attention's help and `cotan params`
  std::vector<ExtraParam> params;   // in the order init_params draws them
  std::vector<KindBuffer> buffers;
  AttentionCoreFn composed;     // required: the kind's definition and the oracle of the others
  AttentionCoreFn fused;        // optional: run instead of composed when options.impl is fused
  CachedStepFn cached_step;     // optional: incremental decoding (has_cached_step)
  bool study_each_phi = false;  // `cotan distill` runs one student per phi (linear_clip, sigmoid)
  // The built-in path: the Backend's core kernel (softmax, sink, affine) in Attention::apply and
  // extend, fused or composed, with the kind's projections (alpha_proj, gate_proj) stacked into
  // the q/k/v product and the output gate when `gated`. A row with a core declares exactly the
  // parameters and buffers that path reads (backend_params, backend_buffers). Without one,
  // Attention::apply runs `fused` or `composed`, then the gate when `gated`.
  std::optional<CoreKind> core;
  bool gated = false;  // the layer multiplies the core's output by sigmoid(x W_g^T) (gate_proj.weight)
  AttentionKind kind{};  // set by register_attention_kind

  bool has_cached_step() const { return core.has_value() || bool(cached_step); }
};

// Adds a row to the registry and returns its kind. Thread-safe; callable during static
// initialisation. Throws "[attention] attention kind 'x' is already registered" for a name taken,
// and "[attention] cannot register attention kind 'x': ..." for a row that is not well formed (no
// composed core, a name clash among its parameters and buffers or with the layer's projections,
// an empty shape, a gate without gate_proj.weight [H d, D], a core whose parameters differ from
// backend_params).
AttentionKind register_attention_kind(AttentionKindInfo row);

// Every row, in registration order (the built-ins first, in AttentionKind's order). The rows live
// as long as the program: references to them stay valid while other kinds are registered.
std::vector<std::reference_wrapper<const AttentionKindInfo>> attention_kinds();
// Throws "[attention] no attention kind has index N (N registered)".
const AttentionKindInfo& attention_kind(AttentionKind kind);
std::optional<AttentionKind> find_attention_kind(std::string_view name);

inline std::string_view name_of(AttentionKind kind) { return attention_kind(kind).name; }
inline bool is_affine(AttentionKind kind) { return attention_kind(kind).core == CoreKind::affine; }
inline bool is_gated(AttentionKind kind) { return attention_kind(kind).gated; }

// Throws "[config] unknown attention kind 'x' (known: softmax, sink, affine, gated, affine_gated)",
// user kinds included once registered.
AttentionKind parse_attention_kind(std::string_view text);
// "softmax, sink, affine, gated, affine_gated" with `separator` between the names.
std::string attention_kind_names(std::string_view separator = ", ");
// Per kind, a line with its name and help text, and a line with the parameters it adds and the
// buffers it keeps (if any), each line starting with `indent`.
std::string attention_kinds_help(std::string_view indent = "  ");

// The parameters and buffers the built-in path reads for a core and gate, in draw order.
std::vector<ExtraParam> backend_params(CoreKind core, bool gated);
std::vector<KindBuffer> backend_buffers(CoreKind core);

// [rows] or [rows, cols] in the given sizes.
Shape shape_of(const ExtraParam& p, const AttentionSizes& sizes);
Shape shape_of(const KindBuffer& b, const AttentionSizes& sizes);
// "alpha_proj.weight [4, 128], normal init"
std::string describe(const ExtraParam& p, const AttentionSizes& sizes);
// "alpha_proj.weight [H, D]"
std::string describe(const ExtraParam& p);
// "alpha_ma [H]"
std::string describe(const KindBuffer& b);

}  // namespace cotan::nn
