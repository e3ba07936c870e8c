// Attention kinds from user code (nn/attention_kinds.hpp): rows registered beside the built-in
// ones, one during static initialisation (temperature: softmax with a learned temperature per
// head, with fused and cached cores) and one at run time (head_gain: a learned gain per head and a
// buffer, no cached step). Their parameters and buffers, their forward pass against the attention
// composed by hand, gradcheck through a CausalLM, config.json and model directories, the remote
// code's refusal, decoding and its fallback, the registry's errors, and the built-in rows' own
// cores run through the registry's path against the built-in one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "nn/attention.hpp"
#include "nn/generate.hpp"
#include "nn/hf_remote_code.hpp"
#include "nn/kv_cache.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::nn;

namespace {

// tau [H] as [1, H, 1, 1]: head h's scores (q . k) / sqrt(d) times tau_h, which is q scaled by tau_h.
Tensor temperature_of(const ParamView& ps) { return reshape(ps["temperature"], {1, -1, 1, 1}); }

AttentionCore softmax_core(const Tensor& q, const Tensor& k, const Tensor& v) {
  AttentionCore core;
  core.q = q;
  core.k = k;
  core.v = v;
  return core;
}

AttentionKindInfo temperature_row() {
  AttentionKindInfo row;
  row.name = "temperature";
  row.help = "softmax attention with a learned temperature per head";
  row.params = {{"temperature", LayerDim::heads, LayerDim::none, Init::ones, false, "multiplies head h's scores"}};
  row.composed = [](const CoreInputs& in) {
    return CoreResult{attention_composed(softmax_core(in.q * temperature_of(in.ps), in.k, in.v)), {}};
  };
  row.fused = [](const CoreInputs& in) {
    return CoreResult{attention_fused(softmax_core(in.q * temperature_of(in.ps), in.k, in.v)), {}};
  };
  row.cached_step = [](const CachedStepInputs& in) {
    CachedAttentionSpec spec;
    spec.q = in.q * temperature_of(in.ps);
    spec.k = in.k;
    spec.v = in.v;
    spec.visible = in.visible;
    return cached_attention(spec);
  };
  return row;
}

// As user code may register a kind: during static initialisation.
const AttentionKind kTemperature = register_attention_kind(temperature_row());

constexpr double kGainRho = 0.5;

// O = g_h S with a learned gain per head, and a buffer out_rms_ma [H] (starts at 1) that training
// passes move toward each head's RMS of O: a statistic, which O does not read. No cached step.
// Registered at run time, the first time a test asks for it.
AttentionKind head_gain() {
  static const AttentionKind kind = register_attention_kind([] {
    AttentionKindInfo row;
    row.name = "head_gain";
    row.help = "softmax attention times a learned gain per head";
    row.params = {{"gain", LayerDim::heads, LayerDim::none, Init::ones, false, "multiplies head h's output"}};
    row.buffers = {{"out_rms_ma", LayerDim::heads, LayerDim::none, 1.0, "rho ma + (1 - rho) RMS of O per head"}};
    row.composed = [](const CoreInputs& in) {
      CoreResult out{attention_composed(softmax_core(in.q, in.k, in.v)) * reshape(in.ps["gain"], {1, -1, 1, 1}), {}};
      if (in.st.training) {
        const Tensor o = out.o.detach();
        out.buffers["out_rms_ma"] = in.buffer("out_rms_ma") * kGainRho + sqrt(mean(o * o, {0, 2, 3})) * (1 - kGainRho);
      }
      return out;
    };
    return row;
  }());
  return kind;
}

ModelConfig micro(AttentionKind kind) {
  ModelConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.intermediate_size = 12;
  c.max_position_embeddings = 32;
  c.init_std = 0.3;  // large enough that every path matters in the gradient checks
  c.attention.kind = kind;
  return c;
}

// Four query heads on two kv heads, q/k/v biases: the decoding tests' model.
ModelConfig small(AttentionKind kind) {
  ModelConfig c = micro(kind);
  c.model_type = "qwen2";
  c.vocab_size = 13;
  c.hidden_size = 16;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 24;
  c.qkv_bias = true;
  return c;
}

// The kinds' own parameters (temperature, gain) away from 1, so that they matter.
void randomize_kind_params(Params& ps, Generator& gen) {
  for (auto& [name, t] : ps)
    if (name.ends_with(".temperature") || name.ends_with(".gain")) t = rand(t.shape(), gen, t.dtype()) + 0.5;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && max(abs(a - b)).item<double>() == 0.0;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  return -mean(gather(log_softmax(logits, -1), -1, unsqueeze(targets, -1)));
}

Tensor random_ids(Shape shape, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  return randint(shape, 0, vocab, gen);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a kind registered by user code is a row of the registry, beside the built-in ones") {
  CHECK(kTemperature.index() == 5);  // after the five built-ins, in AttentionKind's order
  CHECK(AttentionKind::softmax.index() == 0);
  CHECK(AttentionKind{} == AttentionKind::softmax);
  CHECK(attention_kind_names().starts_with("softmax, sink, affine, gated, affine_gated, temperature"));
  CHECK(parse_attention_kind("temperature") == kTemperature);
  CHECK(find_attention_kind("temperature") == kTemperature);
  CHECK_FALSE(find_attention_kind("no_such_kind").has_value());
  CHECK(name_of(kTemperature) == "temperature");
  CHECK_FALSE(is_affine(kTemperature));
  CHECK_FALSE(is_gated(kTemperature));
  const AttentionKindInfo& row = attention_kind(kTemperature);
  CHECK(row.kind == kTemperature);
  CHECK(row.has_cached_step());
  CHECK_FALSE(row.core.has_value());
  const AttentionKind gain = head_gain();
  CHECK(gain.index() > kTemperature.index());
  CHECK_FALSE(attention_kind(gain).has_cached_step());
  const std::string help = attention_kinds_help();
  CHECK(help.find("  temperature   softmax attention with a learned temperature per head\n") != std::string::npos);
  CHECK(help.find("adds temperature [H]\n") != std::string::npos);
  CHECK(help.find("adds gain [H]; keeps out_rms_ma [H]\n") != std::string::npos);
  CHECK(help.find("adds alpha_proj.weight [H, D]; keeps alpha_ma [H]\n") != std::string::npos);
  // The built-in rows, as before: their Backend cores, gates, parameters and buffer.
  for (const AttentionKindInfo& k : attention_kinds()) {
    CAPTURE(k.name);
    CHECK(attention_kind(k.kind).name == k.name);
    if (!k.core) continue;
    CHECK(k.kind.index() < 5);
    CHECK(k.params.size() == backend_params(*k.core, k.gated).size());
    CHECK(k.buffers.size() == size_t(k.core == CoreKind::affine));
  }
  std::ostringstream printed;
  printed << kTemperature << " " << AttentionKind::affine_gated;
  CHECK(printed.str() == "temperature affine_gated");
  CHECK(error_of([] { attention_kind(AttentionKind(60000)); }).starts_with("[attention] no attention kind has index 60000 ("));
}

TEST_CASE("the user kinds' parameters in param_specs and their buffers in State") {
  CausalLM with(micro(kTemperature)), base(micro(AttentionKind::softmax));
  std::map<std::string, ParamSpec> added;
  for (const ParamSpec& s : with.param_specs()) added[s.name] = s;
  for (const ParamSpec& s : base.param_specs()) added.erase(s.name);
  REQUIRE(added.size() == 2);
  for (const char* layer : {"model.layers.0.self_attn.", "model.layers.1.self_attn."}) {
    const ParamSpec& s = added.at(layer + std::string("temperature"));
    CHECK(s.shape == Shape{2});
    CHECK(s.init == Init::ones);
    CHECK_FALSE(s.decay);
  }
  Generator gen(1);
  auto [ps, st] = with.init(gen, DType::f64);
  CHECK(ps.at("model.layers.1.self_attn.temperature").to_vector<double>() == std::vector<double>{1.0, 1.0});
  CHECK(st.buffers.empty());

  CausalLM gained(micro(head_gain()));
  const State gst = gained.init_state(DType::f64);
  REQUIRE(gst.buffers.size() == 2);
  CHECK(gst.buffers.at("model.layers.0.self_attn.out_rms_ma").to_vector<double>() == std::vector<double>{1.0, 1.0});
  // Shapes in the layer's other sizes: Hkv, d and Hkv d.
  ExtraParam per_kv{"per_kv", LayerDim::kv_heads, LayerDim::head_dim, Init::zeros, false, ""};
  CHECK(shape_of(per_kv, {16, 4, 8, 2}) == Shape{2, 8});
  CHECK(describe(per_kv) == "per_kv [Hkv, d]");
  CHECK(shape_of(ExtraParam{"w", LayerDim::kv_heads_x_head_dim, LayerDim::model, Init::normal, true, ""}, {16, 4, 8, 2}) == Shape{16, 16});
}

TEST_CASE("at temperature 1 the user kind computes softmax's logits bit for bit, fused and composed") {
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::composed}) {
    CAPTURE(int(impl));
    ModelConfig soft = small(AttentionKind::softmax), temp = small(kTemperature);
    soft.attention.impl = temp.attention.impl = impl;
    Generator gen(2);
    auto [ps, st] = CausalLM(soft).init(gen, DType::f32);
    Params with = ps;
    for (int layer = 0; layer < 2; ++layer)
      with.emplace(cat("model.layers.", layer, ".self_attn.temperature"), ones({4}, DType::f32));
    const Tensor ids = random_ids({2, 9}, 13, 3);
    CHECK(same_bits(CausalLM(soft).apply(ids, ps, st).first, CausalLM(temp).apply(ids, with, st).first));
  }
}

TEST_CASE("the user kind's attention layer equals the attention composed by hand") {
  const int64_t b = 2, t = 6, dim = 16, heads = 4, kv_heads = 2, d = 4;
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::composed}) {
    CAPTURE(int(impl));
    AttentionConfig options;
    options.kind = kTemperature;
    options.impl = impl;
    const Rope rotary{d, 10000.0, {}};
    const Attention layer{dim, heads, kv_heads, d, false, options, rotary};
    std::vector<ParamSpec> specs;
    layer.specs(specs, "");
    Generator gen(4);
    Params ps = init_params(specs, gen, DType::f64, 0.3);
    ps.at("temperature") = rand({heads}, gen, DType::f64) * 2.0 + 0.25;
    const Tensor x = randn({b, t, dim}, gen, DType::f64);
    const Tensor got = layer.apply(x, ParamView(ps), State{}, "").first;

    // By hand: per head h (reading kv head h / 2), softmax over j <= i of (q_i . k_j) / sqrt(d) tau_h.
    auto heads_of = [&](const char* w, int64_t n) {
      return permute(reshape(matmul(x, transpose(ps.at(w))), {b, t, n, d}), {0, 2, 1, 3});
    };
    auto [cos, sin] = rotary.tables(t, DType::f64, Device::cpu());
    const Tensor q = Rope::apply(heads_of("q_proj.weight", heads), cos, sin);
    const Tensor k = Rope::apply(heads_of("k_proj.weight", kv_heads), cos, sin);
    const Tensor v = heads_of("v_proj.weight", kv_heads);
    const std::vector<double> tau = ps.at("temperature").to_vector<double>();
    std::vector<double> mask(size_t(t * t));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) mask[size_t(i * t + j)] = j <= i ? 0.0 : -INFINITY;
    const Tensor causal = from_vector(mask, {t, t});
    std::vector<Tensor> outs;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kv_heads);
      const Tensor qh = slice(q, 1, h, h + 1), kg = slice(k, 1, g, g + 1), vg = slice(v, 1, g, g + 1);
      const Tensor scores = matmul(qh, transpose(kg)) * (tau[size_t(h)] / std::sqrt(double(d))) + causal;
      outs.push_back(matmul(softmax(scores, -1), vg));  // [B, 1, T, d]
    }
    const Tensor o = reshape(permute(concat(outs, 1), {0, 2, 1, 3}), {b, t, heads * d});
    const Tensor expected = matmul(o, transpose(ps.at("o_proj.weight")));
    CHECK(max_abs_diff(got, expected) <= 1e-12);
  }
}

TEST_CASE("gradcheck in f64 through a tiny CausalLM with each user kind (loss to every parameter)") {
  for (AttentionKind kind : {kTemperature, head_gain()}) {
    for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::composed}) {
      CAPTURE(name_of(kind));
      CAPTURE(int(impl));
      ModelConfig c = micro(kind);
      c.attention.impl = impl;
      CausalLM model(c);
      Generator gen(13);
      auto [ps, st] = model.init(gen, DType::f64);
      randomize_kind_params(ps, gen);
      const Tensor ids = random_ids({2, 5}, 11, 8), targets = random_ids({2, 5}, 11, 9);
      std::vector<std::string> names;
      std::vector<Tensor> inputs;
      for (const auto& [name, t] : ps) names.push_back(name), inputs.push_back(t);
      auto result = gradcheck(
          [&](const std::vector<Tensor>& in) {
            Params p;
            for (size_t i = 0; i < names.size(); ++i) p.emplace(names[i], in[i]);
            return cross_entropy(model.apply(ids, p, st).first, targets);
          },
          inputs);
      INFO(result.describe());
      CHECK(result.pass);
      CHECK(result.max_rel_err < 1e-6);
    }
  }
}

TEST_CASE("a user kind's buffer: its initial value, updated in training passes, frozen in evaluation, once under checkpoint") {
  CausalLM model(micro(head_gain()));
  Generator gen(9);
  auto [ps, st] = model.init(gen, DType::f64);
  const std::string key = "model.layers.1.self_attn.out_rms_ma";
  const Tensor ids = random_ids({2, 5}, 11, 2);
  // With every gain 0, O = 0: each training pass halves the buffer (rho 0.5 toward an RMS of 0).
  Params silent = ps;
  for (auto& [name, t] : silent)
    if (name.ends_with(".gain")) t = zeros_like(t);
  CHECK(model.apply(ids, silent, st).second.buffers.at(key).to_vector<double>() == std::vector<double>{1.0, 1.0});
  st.training = true;
  const State s1 = model.apply(ids, silent, st).second;
  CHECK(s1.buffers.at(key).to_vector<double>() == std::vector<double>{0.5, 0.5});
  CHECK(model.apply(ids, silent, s1).second.buffers.at(key).to_vector<double>() == std::vector<double>{0.25, 0.25});
  CHECK(st.buffers.at(key).to_vector<double>() == std::vector<double>{1.0, 1.0});  // never changed in place

  // Checkpointed blocks: the same loss, gradients and buffers as the plain model, bit for bit.
  randomize_kind_params(ps, gen);
  const Tensor targets = random_ids({2, 5}, 11, 3);
  CausalLM checkpointed(micro(head_gain()), true);
  State after_plain, after_ck;
  auto loss_and_grads = [&](const CausalLM& m, State& after) {
    return value_and_grad(
        [&](const Params& p) {
          auto [logits, next] = m.apply(ids, p, st);
          after = next;
          return cross_entropy(logits, targets);
        },
        ps);
  };
  auto [plain_loss, plain_grads] = loss_and_grads(model, after_plain);
  auto [ck_loss, ck_grads] = loss_and_grads(checkpointed, after_ck);
  CHECK(plain_loss.item<double>() == ck_loss.item<double>());
  for (const auto& [name, g] : plain_grads) {
    CAPTURE(name);
    CHECK(same_bits(g, ck_grads.at(name)));
  }
  for (const auto& [name, t] : after_plain.buffers) {
    CAPTURE(name);
    CHECK(t.to_vector<double>() != std::vector<double>{1.0, 1.0});
    CHECK(same_bits(t, after_ck.buffers.at(name)));
  }
}

TEST_CASE("config.json names the user kind; a config naming a kind no one registered is refused, listing the known") {
  const ModelConfig c = micro(kTemperature);
  const Json j = c.to_json();
  CHECK(j["attention"]["kind"] == "temperature");
  const ModelConfig back = ModelConfig::from_json(parse_json(dump_json(j)), "config.json");
  CHECK(back.attention.kind == kTemperature);
  CHECK(back.to_json() == j);
  Json unknown = j;
  unknown["attention"]["kind"] = "no_such_kind";
  CHECK(error_of([&] { ModelConfig::from_json(unknown, "config.json"); })
            .starts_with("[config] unknown attention kind 'no_such_kind' (known: softmax, sink, affine, gated, "
                         "affine_gated, temperature"));
}

TEST_CASE("registration refuses a name taken and rows that are not well formed, naming the kind") {
  const std::string before = attention_kind_names();
  CHECK(error_of([] { register_attention_kind(temperature_row()); })
            .starts_with("[attention] attention kind 'temperature' is already registered (registered: softmax, sink, "
                         "affine, gated, affine_gated, temperature"));
  AttentionKindInfo softmax = temperature_row();
  softmax.name = "softmax";
  softmax.params.clear();
  CHECK(error_of([&] { register_attention_kind(softmax); })
            .starts_with("[attention] attention kind 'softmax' is already registered"));
  auto refused = [](AttentionKindInfo row) { return error_of([&] { register_attention_kind(std::move(row)); }); };
  AttentionKindInfo row = temperature_row();
  row.name = "bare";
  row.composed = nullptr;
  CHECK(refused(row) == "[attention] cannot register attention kind 'bare': it has no composed core");
  row = temperature_row();
  row.name = "my kind";
  CHECK(refused(row) == "[attention] cannot register attention kind 'my kind': its name must be letters, digits and '_'");
  row = temperature_row();
  row.name = "clash";
  row.params.push_back({"q_proj.weight", LayerDim::heads_x_head_dim, LayerDim::model, Init::normal, true, ""});
  CHECK(refused(row) ==
        "[attention] cannot register attention kind 'clash': parameter 'q_proj.weight' is a name of the layer's own "
        "projections");
  row = temperature_row();
  row.name = "twice";
  row.buffers.push_back({"temperature", LayerDim::heads, LayerDim::none, 0.0, ""});
  CHECK(refused(row) == "[attention] cannot register attention kind 'twice': the name 'temperature' is declared twice");
  row = temperature_row();
  row.name = "empty";
  row.params[0].rows = LayerDim::none;
  CHECK(refused(row) ==
        "[attention] cannot register attention kind 'empty': parameter 'temperature' has an empty shape (its rows are none)");
  row = temperature_row();
  row.name = "ungated";
  row.gated = true;
  CHECK(refused(row) ==
        "[attention] cannot register attention kind 'ungated': a gated kind declares gate_proj.weight [H d, D]");
  row = temperature_row();
  row.name = "sink_alike";
  row.core = CoreKind::sink;
  CHECK(refused(row) ==
        "[attention] cannot register attention kind 'sink_alike': the sink core reads the parameters sinks [H] and the "
        "buffers none; the row declares temperature [H] and none");
  CHECK(attention_kind_names() == before);  // nothing refused was added
}

TEST_CASE("threads register kinds and read the registry at once: each row once, under its own index") {
  constexpr int kThreads = 4, kEach = 8;
  std::vector<std::vector<AttentionKind>> kinds(kThreads);
  std::vector<size_t> seen(kThreads);  // rows each thread read back beside the writers
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([i, &kinds, &seen] {
      for (int j = 0; j < kEach; ++j) {
        AttentionKindInfo row = temperature_row();
        row.name = cat("concurrent_", i, "_", j);
        kinds[size_t(i)].push_back(register_attention_kind(row));
        for (const AttentionKindInfo& k : attention_kinds()) seen[size_t(i)] += k.name.starts_with("concurrent_");
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t n : seen) CHECK(n >= size_t(kEach * (kEach + 1) / 2));  // at least its own rows, each time
  std::vector<uint16_t> indices;
  for (int i = 0; i < kThreads; ++i)
    for (int j = 0; j < kEach; ++j) {
      const AttentionKind kind = kinds[size_t(i)][size_t(j)];
      CHECK(name_of(kind) == cat("concurrent_", i, "_", j));
      CHECK(parse_attention_kind(cat("concurrent_", i, "_", j)) == kind);
      indices.push_back(kind.index());
    }
  std::sort(indices.begin(), indices.end());
  CHECK(std::adjacent_find(indices.begin(), indices.end()) == indices.end());
}

TEST_CASE("a core that breaks its contract is refused when it runs, naming the kind") {
  AttentionKindInfo row = temperature_row();
  row.name = "returns_v";
  row.fused = nullptr;
  row.composed = [](const CoreInputs& in) { return CoreResult{in.v, {}}; };  // [B, Hkv, T, d]: too few heads
  const AttentionKind returns_v = register_attention_kind(row);
  CausalLM wrong(micro(returns_v));
  Generator gen(5);
  auto [ps, st] = wrong.init(gen, DType::f64);
  CHECK(error_of([&] { wrong.apply(random_ids({1, 3}, 11, 1), ps, st); }) ==
        "[attention] the core of attention kind 'returns_v' returned O [1, 1, 3, 4], expected [B, H, T, d] = [1, 2, 3, 4]");

  row = temperature_row();
  row.name = "stray_update";
  row.fused = nullptr;
  row.buffers = {{"count", LayerDim::heads, LayerDim::none, 0.0, "one more per training pass"}};
  row.composed = [](const CoreInputs& in) {
    return CoreResult{attention_composed(softmax_core(in.q, in.k, in.v)), {{"count", in.buffer("count") + 1.0}}};
  };
  CausalLM stray(micro(register_attention_kind(row)));
  auto [ps2, st2] = stray.init(gen, DType::f64);
  CHECK(error_of([&] { stray.apply(random_ids({1, 3}, 11, 1), ps2, st2); }) ==
        "[attention] the core of attention kind 'stray_update' updated buffer 'count' in an evaluation pass (buffers "
        "change in training passes only)");
  st2.buffers.erase("model.layers.0.self_attn.count");
  CHECK(error_of([&] { stray.apply(random_ids({1, 3}, 11, 1), ps2, st2); }) ==
        "[attention] state has no buffer 'model.layers.0.self_attn.count'");
  CHECK(error_of([&] { stray.analyze(random_ids({1, 3}, 11, 1), ps2, stray.init_state(DType::f64)); })
            .starts_with("[analyze] attention kind 'stray_update' computes its own core"));
}

TEST_CASE("decoding: a user kind's cached step equals full recomputation; a kind without one is refused, generate recomputes") {
  CausalLM lm(small(kTemperature));
  CHECK(lm.has_kv_cache());
  Generator gen(6);
  auto [ps, st] = lm.init(gen, DType::f64);
  randomize_kind_params(ps, gen);
  std::vector<std::vector<int32_t>> rows = {{1, 2, 3, 4, 5}, {6}, {7, 8, 9}};
  KVCache cache;
  cache.prefill_chunk = 2;  // later chunks run the cached step too
  Tensor logits = lm.prefill(rows, ps, st, cache);
  Generator draws(7);
  for (int step = 0; step <= 4; ++step) {
    CAPTURE(step);
    for (size_t r = 0; r < rows.size(); ++r) {
      CAPTURE(r);
      const int64_t t = int64_t(rows[r].size());
      const Tensor full_logits = lm.apply(from_vector(rows[r], {1, t}), ps, st).first;
      CHECK(max_abs_diff(slice(logits, 0, int64_t(r), int64_t(r) + 1), reshape(slice(full_logits, 1, t - 1, t), {1, -1})) <= 1e-12);
    }
    if (step == 4) break;
    const std::vector<int32_t> next = randint({3}, 0, 13, draws, DType::i32).to_vector<int32_t>();
    for (size_t r = 0; r < rows.size(); ++r) rows[r].push_back(next[r]);
    logits = lm.decode_step(from_vector(next, {3, 1}), ps, st, cache);
  }

  CausalLM gained(small(head_gain()));
  CHECK_FALSE(gained.has_kv_cache());
  auto [gps, gst] = gained.init(gen, DType::f64);
  randomize_kind_params(gps, gen);
  const std::string refusal =
      "[decode] attention kind 'head_gain' has no cached decoding step (its row has no cached_step): decode by "
      "recomputing whole sequences (has_kv_cache() is false; generate() and evaluation do so themselves)";
  KVCache none;
  CHECK(error_of([&] { gained.prefill(rows, gps, gst, none); }) == refusal);
  CHECK(error_of([&] { gained.prefill(from_vector(std::vector<int32_t>{1, 2}, {1, 2}), gps, gst, none); }) == refusal);
  CHECK(error_of([&] { gained.extend(from_vector(std::vector<int32_t>{1}, {1, 1}), gps, gst, none); }) == refusal);
  CHECK(error_of([&] { gained.decode_step(from_vector(std::vector<int32_t>{1}, {1, 1}), gps, gst, none); }) == refusal);
  for (bool greedy : {true, false}) {
    CAPTURE(greedy);
    GenerateConfig c;
    c.max_new_tokens = 6;
    c.sampling.greedy = greedy;
    Generator a(99), b(99);
    const Generation asked_cached = generate(gained, gps, gst, rows, c, a);
    c.use_cache = false;
    const Generation recomputed = generate(gained, gps, gst, rows, c, b);
    CHECK(asked_cached.tokens == recomputed.tokens);
    CHECK(asked_cached.new_tokens == 18);
  }
}

TEST_CASE("model directories: a user kind's weights, buffers and config; the remote code refuses it by name") {
  CausalLM model(micro(head_gain()));
  Generator gen(11);
  auto [ps, st] = model.init(gen, DType::f32);
  randomize_kind_params(ps, gen);
  const Tensor ids = random_ids({2, 5}, 11, 4);
  st.training = true;
  st = model.apply(ids, ps, st).second;  // buffers off their initial value
  st.training = false;
  TempDir dir;
  save_model_dir(dir.path.string(), model.config(), ps, st);
  const Json config = read_json_file(dir / "config.json");
  CHECK(config["model_type"] == "cotan");
  CHECK(config["base_model_type"] == "llama");
  CHECK(config["attention"]["kind"] == "head_gain");
  const LoadedModel back = load_model_dir(dir.path.string());
  CHECK(back.config.attention.kind == head_gain());
  for (const auto& [name, t] : ps) CHECK(same_bits(t, back.params.at(name)));
  for (const auto& [name, t] : st.buffers) CHECK(same_bits(t, back.state.buffers.at(name)));
  CHECK(same_bits(model.apply(ids, ps, st).first, CausalLM(back.config).apply(ids, back.params, back.state).first));

  // The remote code's table of kinds, from the registry: the built-ins with their cores and
  // gates, the user kinds as None.
  const std::string modeling = read_text(dir / "modeling_cotan.py");
  CHECK(modeling.find("\nKINDS = {}\n") == std::string::npos);
  CHECK(modeling.find("\nKINDS = {\"softmax\": {\"core\": \"softmax\", \"gated\": False}, \"sink\": {\"core\": \"sink\", "
                      "\"gated\": False}, \"affine\": {\"core\": \"affine\", \"gated\": False}, \"gated\": {\"core\": "
                      "\"softmax\", \"gated\": True}, \"affine_gated\": {\"core\": \"affine\", \"gated\": True}, "
                      "\"temperature\": None, ") != std::string::npos);
  CHECK(modeling.find("\"head_gain\": None") != std::string::npos);
  CHECK(remote_code_kinds_table().starts_with("KINDS = {\"softmax\": {\"core\": \"softmax\", \"gated\": False}, "));

  // The exported Python, run against stand-ins of torch and transformers (enough to build one
  // attention layer): the built-in kinds build theirs, a user kind and an unknown one are refused
  // by name.
  if (std::system("python3 -c pass > /dev/null 2>&1") != 0) {
    MESSAGE("no python3: the exported remote code is checked by its text only");
    return;
  }
  TempDir py;
  for (const char* name : {"modeling_cotan.py", "configuration_cotan.py"})
    write_file(py / (std::string("exported/") + name), read_text(dir / name));
  write_file(py / "exported/__init__.py", "");
  write_file(py / "check.py", R"py(import importlib, sys, types

class Module:
    def __init__(self, *args, **kwargs):
        pass

    def register_buffer(self, name, value, persistent=True):
        setattr(self, name, value)

def anything(*args, **kwargs):
    return object()

torch = types.ModuleType("torch")
torch.nn = types.ModuleType("torch.nn")
torch.nn.Module, torch.nn.Linear, torch.nn.Parameter, torch.nn.Embedding = Module, anything, anything, anything
torch.nn.ModuleList, torch.nn.functional = list, types.SimpleNamespace()
torch.zeros, torch.ones, torch.Tensor, torch.float64 = anything, anything, object, None
transformers = types.ModuleType("transformers")
transformers.PretrainedConfig = type("PretrainedConfig", (), {"__init__": lambda self, **kwargs: None})
transformers.GenerationMixin, transformers.PreTrainedModel = object, Module
outputs = types.ModuleType("transformers.modeling_outputs")
outputs.CausalLMOutputWithPast = object
sys.modules.update({"torch": torch, "torch.nn": torch.nn, "transformers": transformers,
                    "transformers.modeling_outputs": outputs})
sys.path.insert(0, sys.argv[1])
m = importlib.import_module("exported.modeling_cotan")

def layer(kind):
    config = m.CotanConfig(vocab_size=11, hidden_size=8, intermediate_size=12, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, attention={"kind": kind})
    return m.CotanAttention(config)

for kind, core, gated in [("softmax", "softmax", False), ("sink", "sink", False), ("affine_gated", "affine", True)]:
    a = layer(kind)
    assert (a.core, a.gated) == (core, gated), (kind, a.core, a.gated)
    assert hasattr(a, "gate_proj") == gated and hasattr(a, "alpha_ma") == (core == "affine"), kind
for kind, error in [("head_gain", NotImplementedError), ("no_such_kind", ValueError)]:
    try:
        layer(kind)
    except error as e:
        assert repr(kind) in str(e), str(e)
        print(type(e).__name__ + ": " + str(e))
    else:
        raise SystemExit(f"{kind} was not refused")
print("ok")
)py");
  const std::string log = py / "log.txt";
  const int status = std::system(("python3 " + (py / "check.py") + " " + py.path.string() + " > " + log + " 2>&1").c_str());
  const std::string out = read_text(log);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("NotImplementedError: attention kind 'head_gain' computes a core of its own") != std::string::npos);
  CHECK(out.find("ValueError: unknown attention kind 'no_such_kind'") != std::string::npos);
}

TEST_CASE("the built-in kinds through the registry's path: their composed and fused cores give the Backend path's layer") {
  // Each built-in row again, under another name and without its Backend core: Attention::apply
  // then runs the row's own cores on q, k, v (alpha_proj as its own product) and the gate.
  for (const AttentionKindInfo& builtin : attention_kinds()) {
    if (!builtin.core) continue;
    CAPTURE(builtin.name);
    AttentionKindInfo copy = builtin;
    copy.name += "_registered";
    copy.core.reset();
    const AttentionKind registered = register_attention_kind(copy);
    CHECK_FALSE(CausalLM(micro(registered)).has_kv_cache());
    CHECK_FALSE(CausalLM(micro(registered)).has_attention_stats());
    for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::composed}) {
      CAPTURE(int(impl));
      ModelConfig a = small(builtin.kind), b = small(registered);
      a.attention.impl = b.attention.impl = impl;
      a.attention.phi = b.attention.phi = AlphaFn::sigmoid;
      CausalLM backend(a), generic(b);
      CHECK(generic.param_specs().size() == backend.param_specs().size());
      Generator gen(21);
      auto [ps, st] = backend.init(gen, DType::f64);
      for (auto& [name, t] : ps)
        if (name.ends_with(".sinks")) t = randn(t.shape(), gen, DType::f64);
      for (auto& [name, t] : st.buffers) t = rand(t.shape(), gen, DType::f64);
      const Tensor ids = random_ids({2, 7}, 13, 5);
      for (bool training : {false, true}) {
        CAPTURE(training);
        st.training = training;
        auto [want, want_state] = backend.apply(ids, ps, st);
        auto [got, got_state] = generic.apply(ids, ps, st);
        CHECK(max_abs_diff(got, want) <= 1e-12);
        REQUIRE(got_state.buffers.size() == want_state.buffers.size());
        for (const auto& [name, t] : want_state.buffers) CHECK(max_abs_diff(got_state.buffers.at(name), t) <= 1e-15);
      }
    }
  }
}
