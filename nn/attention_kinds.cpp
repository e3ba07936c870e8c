#include "nn/attention_kinds.hpp"

#include <algorithm>

#include "tensor/error.hpp"

namespace cotan::nn {

namespace {

int64_t size_of(LayerDim dim, const AttentionSizes& s) {
  switch (dim) {
    case LayerDim::none: return 0;
    case LayerDim::model: return s.model;
    case LayerDim::heads: return s.heads;
    case LayerDim::heads_x_head_dim: return s.heads * s.head_dim;
  }
  return 0;
}

std::string_view symbol_of(LayerDim dim) {
  switch (dim) {
    case LayerDim::none: return "";
    case LayerDim::model: return "D";
    case LayerDim::heads: return "H";
    case LayerDim::heads_x_head_dim: return "H d";
  }
  return "?";
}

std::string_view init_name(Init init) {
  switch (init) {
    case Init::normal: return "normal";
    case Init::ones: return "ones";
    case Init::zeros: return "zeros";
  }
  return "?";
}

}  // namespace

AttentionKind parse_attention_kind(std::string_view text) {
  for (const AttentionKindInfo& k : attention_kinds())
    if (k.name == text) return k.kind;
  fail("config", "unknown attention kind '", text, "' (known: ", attention_kind_names(), ")");
}

std::string attention_kind_names(std::string_view separator) {
  std::string out;
  for (const AttentionKindInfo& k : attention_kinds()) out += (out.empty() ? "" : std::string(separator)) + std::string(k.name);
  return out;
}

std::string attention_kinds_help(std::string_view indent) {
  size_t width = 0;
  for (const AttentionKindInfo& k : attention_kinds()) width = std::max(width, k.name.size());
  std::string out;
  for (const AttentionKindInfo& k : attention_kinds()) {
    out += cat(indent, k.name, std::string(width + 2 - k.name.size(), ' '), k.help, "\n");
    for (size_t i = 0; i < k.params.size(); ++i)
      out += cat(i ? ", " : cat(indent, std::string(width + 2, ' '), "adds "), describe(k.params[i]),
                 i + 1 == k.params.size() ? "\n" : "");
  }
  return out;
}

Shape shape_of(const ExtraParam& p, const AttentionSizes& sizes) {
  if (p.cols == LayerDim::none) return {size_of(p.rows, sizes)};
  return {size_of(p.rows, sizes), size_of(p.cols, sizes)};
}

std::string describe(const ExtraParam& p, const AttentionSizes& sizes) {
  return cat(p.name, " ", to_string(shape_of(p, sizes)), ", ", init_name(p.init), " init");
}

std::string describe(const ExtraParam& p) {
  std::string shape = cat("[", symbol_of(p.rows));
  if (p.cols != LayerDim::none) shape += cat(", ", symbol_of(p.cols));
  return cat(p.name, " ", shape, "]");
}

}  // namespace cotan::nn
