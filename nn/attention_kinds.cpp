#include "nn/attention_kinds.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <ostream>

#include "tensor/error.hpp"

namespace cotan::nn {

namespace detail {
// nn/attention_kinds_builtin.cpp: the built-in rows, in AttentionKind's order.
std::vector<AttentionKindInfo> builtin_attention_kinds();
}  // namespace detail

namespace {

int64_t size_of(LayerDim dim, const AttentionSizes& s) {
  switch (dim) {
    case LayerDim::none: return 0;
    case LayerDim::model: return s.model;
    case LayerDim::heads: return s.heads;
    case LayerDim::heads_x_head_dim: return s.heads * s.head_dim;
    case LayerDim::kv_heads: return s.kv_heads;
    case LayerDim::head_dim: return s.head_dim;
    case LayerDim::kv_heads_x_head_dim: return s.kv_heads * s.head_dim;
  }
  return 0;
}

std::string_view symbol_of(LayerDim dim) {
  switch (dim) {
    case LayerDim::none: return "";
    case LayerDim::model: return "D";
    case LayerDim::heads: return "H";
    case LayerDim::heads_x_head_dim: return "H d";
    case LayerDim::kv_heads: return "Hkv";
    case LayerDim::head_dim: return "d";
    case LayerDim::kv_heads_x_head_dim: return "Hkv d";
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

std::string shape_symbols(LayerDim rows, LayerDim cols) {
  std::string shape = cat("[", symbol_of(rows));
  if (cols != LayerDim::none) shape += cat(", ", symbol_of(cols));
  return shape + "]";
}

// The rows never move (a deque grows at its end without moving its elements) and are never
// removed, so references handed out stay valid while other threads register kinds.
struct Registry {
  std::mutex mutex;
  std::deque<AttentionKindInfo> rows;
  Registry();  // the built-in rows
};

bool valid_name(std::string_view name, bool dots) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || (dots && c == '.');
  });
}

// Throws "[attention] cannot register attention kind 'x': ..." for a row that is not well formed.
void check_row(const AttentionKindInfo& row) {
  auto bad = [&](const auto&... what) { fail("attention", "cannot register attention kind '", row.name, "': ", what...); };
  if (!valid_name(row.name, false)) bad("its name must be letters, digits and '_'");
  if (!row.composed) bad("it has no composed core");
  std::vector<std::string> names;
  auto claim = [&](const std::string& name, const char* what, LayerDim rows) {
    if (!valid_name(name, true)) bad(what, " name '", name, "' must be letters, digits, '_' and '.'");
    for (const char* own : {"q_proj.", "k_proj.", "v_proj.", "o_proj."})
      if (name.starts_with(own)) bad(what, " '", name, "' is a name of the layer's own projections");
    if (std::find(names.begin(), names.end(), name) != names.end()) bad("the name '", name, "' is declared twice");
    if (rows == LayerDim::none) bad(what, " '", name, "' has an empty shape (its rows are none)");
    names.push_back(name);
  };
  for (const ExtraParam& p : row.params) claim(p.name, "parameter", p.rows);
  for (const KindBuffer& b : row.buffers) claim(b.name, "buffer", b.rows);
  auto declares = [&](const ExtraParam& want) {
    return std::any_of(row.params.begin(), row.params.end(), [&](const ExtraParam& p) {
      return p.name == want.name && p.rows == want.rows && p.cols == want.cols;
    });
  };
  if (row.gated && !declares(kGateProj)) bad("a gated kind declares ", describe(kGateProj));
  if (!row.core) return;
  const std::vector<ExtraParam> params = backend_params(*row.core, row.gated);
  const std::vector<KindBuffer> buffers = backend_buffers(*row.core);
  auto list = [](const auto& items) {
    std::string out;
    for (const auto& item : items) out += cat(out.empty() ? "" : ", ", describe(item));
    return out.empty() ? std::string("none") : out;
  };
  bool same = params.size() == row.params.size() && buffers.size() == row.buffers.size();
  for (size_t i = 0; same && i < params.size(); ++i)
    same = params[i].name == row.params[i].name && params[i].rows == row.params[i].rows &&
           params[i].cols == row.params[i].cols;
  for (size_t i = 0; same && i < buffers.size(); ++i)
    same = buffers[i].name == row.buffers[i].name && buffers[i].rows == row.buffers[i].rows &&
           buffers[i].cols == row.buffers[i].cols && buffers[i].initial == row.buffers[i].initial;
  if (!same)
    bad("the ", core_kind_name(*row.core), row.gated ? " core with the gate" : " core", " reads the parameters ",
        list(params), " and the buffers ", list(buffers), "; the row declares ", list(row.params), " and ",
        list(row.buffers));
}

std::string names_of(const Registry& r, std::string_view separator) {
  std::string out;
  for (const AttentionKindInfo& k : r.rows) out += (out.empty() ? "" : std::string(separator)) + k.name;
  return out;
}

AttentionKind add_row(Registry& r, AttentionKindInfo row) {
  check_row(row);
  for (const AttentionKindInfo& k : r.rows)
    if (k.name == row.name)
      fail("attention", "attention kind '", row.name, "' is already registered (registered: ", names_of(r, ", "), ")");
  if (r.rows.size() > UINT16_MAX) fail("attention", "cannot register attention kind '", row.name, "': the registry is full");
  row.kind = AttentionKind(uint16_t(r.rows.size()));
  r.rows.push_back(std::move(row));
  return r.rows.back().kind;
}

Registry::Registry() {
  for (AttentionKindInfo& row : detail::builtin_attention_kinds()) add_row(*this, std::move(row));
  const AttentionKind order[] = {AttentionKind::softmax, AttentionKind::sink, AttentionKind::affine,
                                 AttentionKind::gated, AttentionKind::affine_gated};
  const std::string_view names[] = {"softmax", "sink", "affine", "gated", "affine_gated"};
  for (size_t i = 0; i < std::size(order); ++i)
    if (rows.size() <= order[i].index() || rows[order[i].index()].name != names[i])
      fail("attention", "the built-in rows must list the kinds in AttentionKind's order, ", names[i], " at ", i);
}

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const Tensor& KindContext::buffer(std::string_view name) const {
  const std::string key = join(prefix, name);
  auto it = st.buffers.find(key);
  if (it == st.buffers.end()) fail("attention", "state has no buffer '", key, "'");
  return it->second;
}

std::ostream& operator<<(std::ostream& out, AttentionKind kind) { return out << name_of(kind); }

AttentionKind register_attention_kind(AttentionKindInfo row) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return add_row(r, std::move(row));
}

std::vector<std::reference_wrapper<const AttentionKindInfo>> attention_kinds() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return {r.rows.begin(), r.rows.end()};
}

const AttentionKindInfo& attention_kind(AttentionKind kind) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (kind.index() >= r.rows.size())
    fail("attention", "no attention kind has index ", kind.index(), " (", r.rows.size(), " registered)");
  return r.rows[kind.index()];
}

std::optional<AttentionKind> find_attention_kind(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const AttentionKindInfo& k : r.rows)
    if (k.name == name) return k.kind;
  return std::nullopt;
}

AttentionKind parse_attention_kind(std::string_view text) {
  if (const std::optional<AttentionKind> kind = find_attention_kind(text)) return *kind;
  fail("config", "unknown attention kind '", text, "' (known: ", attention_kind_names(), ")");
}

std::string attention_kind_names(std::string_view separator) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return names_of(r, separator);
}

std::string attention_kinds_help(std::string_view indent) {
  const auto kinds = attention_kinds();
  size_t width = 0;
  for (const AttentionKindInfo& k : kinds) width = std::max(width, k.name.size());
  std::string out;
  for (const AttentionKindInfo& k : kinds) {
    out += cat(indent, k.name, std::string(width + 2 - k.name.size(), ' '), k.help, "\n");
    std::string adds;
    for (const ExtraParam& p : k.params) adds += cat(adds.empty() ? "adds " : ", ", describe(p));
    for (size_t i = 0; i < k.buffers.size(); ++i)
      adds += cat(i ? ", " : adds.empty() ? "keeps " : "; keeps ", describe(k.buffers[i]));
    if (!adds.empty()) out += cat(indent, std::string(width + 2, ' '), adds, "\n");
  }
  return out;
}

std::vector<ExtraParam> backend_params(CoreKind core, bool gated) {
  std::vector<ExtraParam> out;
  if (core == CoreKind::sink) out.push_back(kSinks);
  if (core == CoreKind::affine) out.push_back(kAlphaProj);
  if (gated) out.push_back(kGateProj);
  return out;
}

std::vector<KindBuffer> backend_buffers(CoreKind core) {
  if (core == CoreKind::affine) return {kAlphaMa};
  return {};
}

Shape shape_of(const ExtraParam& p, const AttentionSizes& sizes) {
  if (p.cols == LayerDim::none) return {size_of(p.rows, sizes)};
  return {size_of(p.rows, sizes), size_of(p.cols, sizes)};
}

Shape shape_of(const KindBuffer& b, const AttentionSizes& sizes) {
  if (b.cols == LayerDim::none) return {size_of(b.rows, sizes)};
  return {size_of(b.rows, sizes), size_of(b.cols, sizes)};
}

std::string describe(const ExtraParam& p, const AttentionSizes& sizes) {
  return cat(p.name, " ", to_string(shape_of(p, sizes)), ", ", init_name(p.init), " init");
}

std::string describe(const ExtraParam& p) { return cat(p.name, " ", shape_symbols(p.rows, p.cols)); }

std::string describe(const KindBuffer& b) { return cat(b.name, " ", shape_symbols(b.rows, b.cols)); }

}  // namespace cotan::nn
