// Layers and whole models: the table of attention kinds, parameter counts, RoPE and RMSNorm
// semantics, phi, the gate and the alpha_ma rule, causality, checkpointing (of a whole model and
// of one attention layer), value_and_grad_aux with a model's State, and end-to-end gradient checks
// for every attention kind.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "nn/model.hpp"
#include "tensor/ops.hpp"
#include "util/json.hpp"

using namespace cotan;
using namespace cotan::nn;

namespace {

ModelConfig micro(AttentionKind kind) {
  ModelConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.intermediate_size = 12;
  c.rms_norm_eps = 1e-6;
  c.init_std = 0.3;  // large enough that every path matters in the gradient checks
  c.attention.kind = kind;
  return c;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  Tensor logp = log_softmax(logits, -1);
  return -mean(gather(logp, -1, unsqueeze(targets, -1)));
}

// Whether a holds b's values, bit for bit.
bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && max(abs(a - b)).item<double>() == 0.0;
}

Tensor random_ids(Shape shape, int64_t vocab, uint64_t seed) {
  Generator gen(seed);
  return randint(shape, 0, vocab, gen);
}

}  // namespace

TEST_CASE("parameter counts reproduce the paper's overheads") {
  auto overhead = [](const char* name, AttentionKind kind) {
    ModelConfig base = preset(name), with = preset(name);
    with.attention.kind = kind;
    return CausalLM(with).num_params() - CausalLM(base).num_params();
  };
  CHECK(overhead("qwen1.5-0.5b", AttentionKind::affine) == 393216);
  CHECK(overhead("llama3.2-1b", AttentionKind::affine) == 1048576);
  CHECK(overhead("llama3.2-3b", AttentionKind::affine) == 2064384);
  CHECK(overhead("llama3.2-1b", AttentionKind::gated) == 67108864);
  CHECK(overhead("llama3.2-3b", AttentionKind::gated) == 264241152);
  CHECK(overhead("llama3.2-1b", AttentionKind::affine_gated) == 67108864 + 1048576);
  CHECK(overhead("llama3.2-3b", AttentionKind::affine_gated) == 264241152 + 2064384);
  CHECK(overhead("llama3.2-1b", AttentionKind::sink) == 32 * 16);
  // Known totals: Llama-3.2-1B has 1,235,814,400 parameters (tied), Qwen1.5-0.5B 463,987,712.
  CHECK(CausalLM(preset("llama3.2-1b")).num_params() == 1235814400);
  CHECK(CausalLM(preset("qwen1.5-0.5b")).num_params() == 463987712);
}

TEST_CASE("the table of attention kinds: names, cores, gates and the parameters each kind declares") {
  std::vector<std::string> names, affine, gated;
  for (const AttentionKindInfo& k : attention_kinds()) {
    CAPTURE(k.name);
    names.emplace_back(k.name);
    if (k.core == CoreKind::affine) affine.emplace_back(k.name);
    if (k.gated) gated.emplace_back(k.name);
    CHECK(parse_attention_kind(k.name) == k.kind);
    CHECK(name_of(k.kind) == k.name);
    CHECK(is_affine(k.kind) == (k.core == CoreKind::affine));
    CHECK_FALSE(k.help.empty());
    CHECK(attention_kinds_help().find("  " + std::string(k.name) + " ") != std::string::npos);
    // The layer declares exactly the row's parameters on top of softmax's, with the row's shapes.
    CausalLM with(micro(k.kind)), base(micro(AttentionKind::softmax));
    std::map<std::string, Shape> added;
    for (const ParamSpec& s : with.param_specs()) added[s.name] = s.shape;
    for (const ParamSpec& s : base.param_specs()) added.erase(s.name);
    REQUIRE(added.size() == 2 * k.params.size());  // micro has 2 layers
    for (const ExtraParam& p : k.params)
      for (const char* layer : {"model.layers.0.self_attn.", "model.layers.1.self_attn."})
        CHECK(added.at(layer + std::string(p.name)) == shape_of(p, {8, 2, 4}));
  }
  CHECK(names == std::vector<std::string>{"softmax", "sink", "affine", "gated", "affine_gated"});
  CHECK(affine == std::vector<std::string>{"affine", "affine_gated"});
  CHECK(gated == std::vector<std::string>{"gated", "affine_gated"});
  CHECK(attention_kind_names(" | ") == "softmax | sink | affine | gated | affine_gated");
  CHECK(describe(kAlphaProj) == "alpha_proj.weight [H, D]");
  CHECK(describe(kSinks) == "sinks [H]");
  CHECK(describe(kGateProj, {2048, 32, 64}) == "gate_proj.weight [2048, 2048], normal init");
  CHECK(describe(kSinks, {2048, 32, 64}) == "sinks [32], zeros init");
}

TEST_CASE("phi, the output gate and next_alpha_ma match their definitions") {
  const std::vector<double> zv{-7.0, -5.0, -1.0, 0.0, 2.5, 5.0, 6.0};
  Tensor z = from_vector(zv, {7});
  auto clipped = linear_clip(z).to_vector<double>(), sig = phi(z, AlphaFn::sigmoid).to_vector<double>();
  CHECK(phi(z, AlphaFn::linear_clip).to_vector<double>() == clipped);
  const std::vector<double> expected_clip{0.0, 0.0, 0.4, 0.5, 0.75, 1.0, 1.0};
  for (size_t i = 0; i < zv.size(); ++i) {
    CHECK(clipped[i] == doctest::Approx(expected_clip[i]).epsilon(1e-15));
    CHECK(sig[i] == doctest::Approx(1 / (1 + std::exp(-zv[i]))).epsilon(1e-15));
  }
  Tensor o = from_vector(std::vector<double>{2.0, -3.0}, {2}), g = from_vector(std::vector<double>{0.0, 1.5}, {2});
  auto gatedv = output_gate(o, g).to_vector<double>();
  CHECK(gatedv[0] == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(gatedv[1] == doctest::Approx(-3.0 / (1 + std::exp(-1.5))).epsilon(1e-15));

  // alpha [B = 2, H = 2, T = 3]: the update averages over b and t, per head.
  Tensor ma = from_vector(std::vector<double>{0.2, 0.6}, {2});
  std::vector<double> av{0.1, 0.2, 0.3, 0.9, 0.8, 0.7, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5};
  Tensor alpha = from_vector(av, {2, 2, 3});
  auto trained = next_alpha_ma(ma, alpha, 0.9, true).to_vector<double>();
  CHECK(trained[0] == doctest::Approx(0.9 * 0.2 + 0.1 * (0.6 + 1.5) / 6).epsilon(1e-15));
  CHECK(trained[1] == doctest::Approx(0.9 * 0.6 + 0.1 * (2.4 + 1.5) / 6).epsilon(1e-15));
  CHECK(next_alpha_ma(ma, alpha, 0.9, false).to_vector<double>() == std::vector<double>{0.2, 0.6});
  // No gradient flows into the running average.
  auto [value, grads] = cotan::value_and_grad(
      [](const std::vector<Tensor>& in) { return sum(next_alpha_ma(in[0], in[1], 0.9, true)); }, {ma, alpha});
  CHECK(max(abs(grads[0])).item<double>() == 0.0);
  CHECK(max(abs(grads[1])).item<double>() == 0.0);
  CHECK_THROWS_WITH_AS(next_alpha_ma(zeros({3}, DType::f64), alpha, 0.9, true),
                       "[attention] alpha_ma must be [H] and alpha [B, H, T], got [3] and [2, 2, 3]", Error);
}

TEST_CASE("nn::Attention::apply under checkpoint: one alpha_ma update and the plain layer's gradients") {
  // As a user writes it: f64, a training pass, the State threaded through a variable that the
  // checkpointed function reads and replaces. The recomputation in the backward pass must see
  // the alpha_ma of the first run, not update it again.
  const int64_t b = 2, t = 70, dim = 16, heads = 4, kv_heads = 2, head_dim = 4;
  for (const AttentionKindInfo& kind : attention_kinds())
    for (AlphaFn fn : {AlphaFn::linear_clip, AlphaFn::sigmoid}) {
      if (fn == AlphaFn::sigmoid && kind.core != CoreKind::affine) continue;
      CAPTURE(kind.name);
      CAPTURE(name_of(fn));
      AttentionConfig options;
      options.kind = kind.kind;
      options.phi = fn;
      Attention attn{dim, heads, kv_heads, head_dim, true, options, Rope{head_dim, 10000.0, {}}};
      std::vector<ParamSpec> specs;
      attn.specs(specs, "attn");
      Generator gen(21);
      Params ps = init_params(specs, gen, DType::f64, 0.3);
      for (auto& [name, p] : ps)  // biases and sinks start at 0: move them off it
        if (name.ends_with("bias") || name.ends_with("sinks")) p = randn(p.shape(), gen, DType::f64) * 0.5;
      State st;
      attn.buffers(st, "attn", DType::f64);
      st.training = true;
      const std::string key = "attn.alpha_ma";
      if (kind.core == CoreKind::affine) st.buffers[key] = rand({heads}, gen, DType::f64);
      Tensor x = randn({b, t, dim}, gen, DType::f64), w = randn({b, t, dim}, gen, DType::f64);

      std::vector<std::string> names;
      std::vector<Tensor> inputs{x};
      for (const auto& [name, p] : ps) names.push_back(name), inputs.push_back(p);
      auto layer = [&](const std::vector<Tensor>& in, const State& s) {
        Params p;
        for (size_t i = 0; i < names.size(); ++i) p.emplace(names[i], in[i + 1]);
        return attn.apply(in[0], ParamView(p).sub("attn"), s, "attn");
      };
      State plain_out;
      auto [plain, plain_grads] = cotan::value_and_grad([&](const std::vector<Tensor>& in) {
        auto [y, next] = layer(in, st);
        plain_out = next;
        return sum(y * w);
      }, inputs);
      State threaded = st;
      int calls = 0;
      auto [ck, ck_grads] = cotan::value_and_grad([&](const std::vector<Tensor>& in) {
        Tensor y = checkpoint([&](const std::vector<Tensor>& xs) {
          ++calls;
          auto [out, next] = layer(xs, threaded);
          threaded = next;
          return out;
        }, in);
        return sum(y * w);
      }, inputs);
      // The same with the State captured by value: the recomputation starts from the input State
      // again (so a layer that merely skipped the update while recomputing would fail here).
      State by_value;
      auto [ck2, ck2_grads] = cotan::value_and_grad([&](const std::vector<Tensor>& in) {
        Tensor y = checkpoint([&, before = st](const std::vector<Tensor>& xs) {
          auto [out, next] = layer(xs, before);
          if (!recomputing()) by_value = next;
          return out;
        }, in);
        return sum(y * w);
      }, inputs);
      CHECK(calls == 2);  // the first run and the recomputation
      CHECK(ck.item<double>() == plain.item<double>());
      CHECK(ck2.item<double>() == plain.item<double>());
      for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(i == 0 ? std::string("x") : names[i - 1]);
        CHECK(max(abs(ck_grads[i] - plain_grads[i])).item<double>() == 0.0);
        CHECK(max(abs(ck2_grads[i] - plain_grads[i])).item<double>() == 0.0);
      }
      if (kind.core != CoreKind::affine) {
        CHECK(threaded.buffers.empty());
        continue;
      }
      CHECK(by_value.buffers.at(key).to_vector<double>() == plain_out.buffers.at(key).to_vector<double>());
      // One update, from the input's alpha_ma: rho ma + (1 - rho) mean(phi(x W_alpha^T)), by hand.
      auto xv = x.to_vector<double>(), wa = ps.at("attn.alpha_proj.weight").to_vector<double>();
      auto ma0 = st.buffers.at(key).to_vector<double>();
      auto got = threaded.buffers.at(key).to_vector<double>();
      CHECK(got == plain_out.buffers.at(key).to_vector<double>());
      for (int64_t h = 0; h < heads; ++h) {
        double total = 0;
        for (int64_t r = 0; r < b * t; ++r) {
          double zz = 0;
          for (int64_t d = 0; d < dim; ++d) zz += xv[size_t(r * dim + d)] * wa[size_t(h * dim + d)];
          total += fn == AlphaFn::linear_clip ? std::clamp(0.1 * zz + 0.5, 0.0, 1.0) : 1 / (1 + std::exp(-zz));
        }
        CHECK(got[size_t(h)] == doctest::Approx(0.9 * ma0[size_t(h)] + 0.1 * total / double(b * t)).epsilon(1e-12));
      }
      // The argument is never changed.
      CHECK(st.buffers.at(key).to_vector<double>() == ma0);
    }
}

TEST_CASE("RoPE preserves norms and depends only on relative position") {
  Rope rope{8, 10000.0, {}};
  auto [cos, sin] = rope.tables(16, DType::f64, Device::cpu());
  Generator gen(3);
  Tensor q = randn({1, 1, 1, 8}, gen, DType::f64), k = randn({1, 1, 1, 8}, gen, DType::f64);
  auto at = [&](const Tensor& x, int64_t pos) {
    return Rope::apply(x, slice(cos, 0, pos, pos + 1), slice(sin, 0, pos, pos + 1));
  };
  CHECK(sum(square(at(q, 5))).item<double>() == doctest::Approx(sum(square(q)).item<double>()).epsilon(1e-12));
  double d1 = sum(at(q, 7) * at(k, 3)).item<double>();
  double d2 = sum(at(q, 12) * at(k, 8)).item<double>();
  CHECK(d1 == doctest::Approx(d2).epsilon(1e-12));
  // Position 0 is the identity.
  CHECK(max(abs(at(q, 0) - q)).item<double>() < 1e-15);
}

TEST_CASE("llama3 frequency scaling keeps short wavelengths and slows long ones by the factor") {
  RopeScaling s{"llama3", 32.0, 1.0, 4.0, 8192};
  Rope plain{64, 5e5, {}}, scaled{64, 5e5, s};
  auto a = plain.inverse_frequencies(), b = scaled.inverse_frequencies();
  for (size_t i = 0; i < a.size(); ++i) {
    double wavelen = 2 * M_PI / a[i];
    if (wavelen < 8192.0 / 4) CHECK(b[i] == a[i]);
    else if (wavelen > 8192.0) CHECK(b[i] == doctest::Approx(a[i] / 32).epsilon(1e-14));
    else CHECK((b[i] < a[i] && b[i] > a[i] / 32));
  }
}

TEST_CASE("RMSNorm matches its definition") {
  Generator gen(5);
  Tensor x = randn({3, 6}, gen, DType::f64), w = randn({6}, gen, DType::f64);
  Params ps{{"norm.weight", w}};
  Tensor y = RMSNorm{6, 1e-5}.apply(x, ParamView(ps).sub("norm"));
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), yv = y.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int c = 0; c < 6; ++c) ms += xv[size_t(r * 6 + c)] * xv[size_t(r * 6 + c)] / 6;
    for (int c = 0; c < 6; ++c)
      CHECK(yv[size_t(r * 6 + c)] == doctest::Approx(wv[size_t(c)] * xv[size_t(r * 6 + c)] / std::sqrt(ms + 1e-5)).epsilon(1e-12));
  }
}

TEST_CASE("every kind is causal: the last token changes no earlier logit") {
  for (const AttentionKindInfo& info : attention_kinds()) {  // every row of the table
    const AttentionKind kind = info.kind;
    CAPTURE(name_of(kind));
    CausalLM model(micro(kind));
    Generator gen(7);
    auto [ps, st] = model.init(gen, DType::f64);
    Tensor ids = random_ids({2, 9}, 11, 1);
    auto other = ids.to_vector<int64_t>();
    other[8] = (other[8] + 3) % 11;
    other[17] = (other[17] + 5) % 11;
    Tensor changed = from_vector(other, {2, 9});
    Tensor a = model.apply(ids, ps, st).first, b = model.apply(changed, ps, st).first;
    CHECK(max(abs(slice(a, 1, 0, 8) - slice(b, 1, 0, 8))).item<double>() == 0.0);
    CHECK(max(abs(slice(a, 1, 8, 9) - slice(b, 1, 8, 9))).item<double>() > 1e-6);
  }
}

TEST_CASE("alpha_ma starts at 0, is updated first in training passes and frozen in evaluation") {
  ModelConfig c = micro(AttentionKind::affine);
  CausalLM model(c);
  Generator gen(9);
  auto [ps, st] = model.init(gen, DType::f64);
  // With W_alpha = 0, z = 0 and alpha = linear_clip(0) = 0.5 everywhere.
  for (auto& [name, t] : ps)
    if (name.ends_with("alpha_proj.weight")) t = zeros_like(t);
  const std::string key = "model.layers.1.self_attn.alpha_ma";
  CHECK(st.buffers.at(key).to_vector<double>() == std::vector<double>{0.0, 0.0});
  Tensor ids = random_ids({2, 5}, 11, 2);
  State eval_out = model.apply(ids, ps, st).second;
  CHECK(eval_out.buffers.at(key).to_vector<double>() == std::vector<double>{0.0, 0.0});
  st.training = true;
  State s1 = model.apply(ids, ps, st).second;
  for (double v : s1.buffers.at(key).to_vector<double>()) CHECK(v == doctest::Approx(0.05).epsilon(1e-15));
  State s2 = model.apply(ids, ps, s1).second;
  for (double v : s2.buffers.at(key).to_vector<double>()) CHECK(v == doctest::Approx(0.095).epsilon(1e-15));
  // The input state is never changed in place.
  CHECK(st.buffers.at(key).to_vector<double>() == std::vector<double>{0.0, 0.0});
}

TEST_CASE("the training update averages alpha over batch rows and positions") {
  CausalLM model(micro(AttentionKind::affine));
  Generator gen(10);
  auto [ps, st] = model.init(gen, DType::f64);
  Tensor ids = random_ids({3, 6}, 11, 4);
  auto layers = model.analyze(ids, ps, st);  // alpha is the same in an evaluation pass
  st.training = true;
  State s1 = model.apply(ids, ps, st).second;
  // Layer 0 sees the same input in both passes (later layers see the effect of the update).
  auto expected = layers[0].alpha_mean.to_vector<double>();
  auto got = s1.buffers.at("model.layers.0.self_attn.alpha_ma").to_vector<double>();
  for (size_t h = 0; h < 2; ++h) {
    CHECK(expected[h] > 0.05);
    CHECK(got[h] == doctest::Approx(0.1 * expected[h]).epsilon(1e-12));
  }
}

TEST_CASE("analyze keeps the last layer's attention weights on request") {
  for (AttentionKind kind : {AttentionKind::softmax, AttentionKind::sink, AttentionKind::affine}) {
    INFO(attention_kind(kind).name);
    CausalLM model(micro(kind));
    Generator gen(12);
    auto [ps, st] = model.init(gen, DType::f64);
    const int64_t t = 6;
    Tensor ids = random_ids({2, t}, 11, 7);
    const auto plain = model.analyze(ids, ps, st), with = model.analyze(ids, ps, st, true);
    REQUIRE(with.size() == plain.size());
    for (size_t l = 0; l < with.size(); ++l) {
      CHECK(with[l].attention.entropy == plain[l].attention.entropy);
      CHECK(with[l].attention.row_sums.to_vector<double>() == plain[l].attention.row_sums.to_vector<double>());
      CHECK(with[l].attention.weights.defined() == (l + 1 == with.size()));
      CHECK(!plain[l].attention.weights.defined());
    }
    const AttentionStats& last = with.back().attention;
    REQUIRE(last.weights.shape() == std::vector<int64_t>{t, t});
    const std::vector<double> a = last.weights.to_vector<double>(), sums = last.row_sums.to_vector<double>();
    const int64_t heads = last.row_sums.size(1);
    for (int64_t i = 0; i < t; ++i) {
      // Row i of the head average sums to the head average of batch row 0's weight sums; keys
      // after the query carry nothing.
      double row = 0, want = 0;
      for (int64_t j = 0; j < t; ++j) {
        if (j > i) CHECK(a[size_t(i * t + j)] == 0.0);
        row += a[size_t(i * t + j)];
      }
      for (int64_t h = 0; h < heads; ++h) want += sums[size_t(h * t + i)] / double(heads);
      CHECK(row == doctest::Approx(want).epsilon(1e-12));
      if (kind == AttentionKind::softmax) CHECK(row == doctest::Approx(1.0).epsilon(1e-12));
      if (kind == AttentionKind::sink) CHECK(row < 1.0);
    }
  }
}

TEST_CASE("checkpointed layers give the same loss, gradients and a single alpha_ma update") {
  ModelConfig c = micro(AttentionKind::affine_gated);
  CausalLM plain(c), ck(c, true);
  Generator gen(11);
  auto [ps, st] = plain.init(gen, DType::f64);
  st.training = true;
  Tensor ids = random_ids({2, 7}, 11, 5), targets = random_ids({2, 7}, 11, 6);
  State after_plain, after_ck;
  auto [l1, g1] = value_and_grad([&](const Params& p) {
    auto [logits, s] = plain.apply(ids, p, st);
    after_plain = s;
    return cross_entropy(logits, targets);
  }, ps);
  auto [l2, g2] = value_and_grad([&](const Params& p) {
    auto [logits, s] = ck.apply(ids, p, st);
    after_ck = s;
    return cross_entropy(logits, targets);
  }, ps);
  CHECK(l1.item<double>() == l2.item<double>());
  for (const auto& [name, g] : g1) {
    CAPTURE(name);
    CHECK(max(abs(g - g2.at(name))).item<double>() == 0.0);
  }
  for (const auto& [name, t] : after_plain.buffers)
    CHECK(t.to_vector<double>() == after_ck.buffers.at(name).to_vector<double>());
}

TEST_CASE("nn::value_and_grad_aux: the gradients of a known function and its auxiliary result") {
  // f(w, b) = sum(w * w) * b -> df/dw = 2 w b, df/db = sum(w^2); aux = the names f saw.
  const Params ps = {{"w", from_vector(std::vector<double>{1.0, -2.0}, {2})},
                     {"b", from_vector(std::vector<double>{3.0}, {1})}};
  auto [value, names, grads] = value_and_grad_aux([](const Params& p) {
    std::vector<std::string> seen;
    for (const auto& [name, t] : p) seen.push_back(name);
    return std::pair{sum(sum(p.at("w") * p.at("w")) * p.at("b")), seen};
  }, ps);
  CHECK(value.item<double>() == 15.0);
  CHECK(names == std::vector<std::string>{"b", "w"});
  CHECK(grads.at("w").to_vector<double>() == std::vector<double>{6.0, -12.0});
  CHECK(grads.at("b").to_vector<double>() == std::vector<double>{5.0});
}

TEST_CASE("nn::value_and_grad_aux: a model's loss with its new State, as value_and_grad and a captured State give") {
  ModelConfig c = micro(AttentionKind::affine);
  CausalLM model(c);
  Generator gen(13);
  auto [ps, st] = model.init(gen, DType::f64);
  st.training = true;
  Tensor ids = random_ids({2, 6}, 11, 8), targets = random_ids({2, 6}, 11, 9);
  State captured;
  auto [l1, g1] = value_and_grad([&](const Params& p) {
    auto [logits, s] = model.apply(ids, p, st);
    captured = s;
    return cross_entropy(logits, targets);
  }, ps);
  auto [l2, next, g2] = value_and_grad_aux([&](const Params& p) {
    auto [logits, s] = model.apply(ids, p, st);
    return std::pair{cross_entropy(logits, targets), s};
  }, ps);
  static_assert(std::is_same_v<decltype(next), State>);
  CHECK(l1.item<double>() == l2.item<double>());
  REQUIRE(g1.size() == g2.size());
  for (const auto& [name, g] : g1) {
    CAPTURE(name);
    CHECK(same_values(g, g2.at(name)));
  }
  CHECK(next.training);
  REQUIRE(next.buffers.size() == captured.buffers.size());
  for (const auto& [name, t] : captured.buffers) {
    CAPTURE(name);
    CHECK(same_values(t, next.buffers.at(name)));
    CHECK(!same_values(t, st.buffers.at(name)));  // the training pass moved alpha_ma
  }
}

TEST_CASE("end-to-end gradient check of a tiny CausalLM for every kind (loss to every parameter)") {
  for (const AttentionKindInfo& info : attention_kinds()) {  // every row of the table
    const AttentionKind kind = info.kind;
    for (bool tied : {false, true}) {
      CAPTURE(name_of(kind));
      CAPTURE(tied);
      ModelConfig c = micro(kind);
      c.tie_word_embeddings = tied;
      c.qkv_bias = !tied;
      CausalLM model(c);
      Generator gen(13);
      auto [ps, st] = model.init(gen, DType::f64);
      for (auto& [name, t] : ps)  // biases and sinks start at 0: move them off it
        if (name.ends_with("bias") || name.ends_with("sinks")) t = randn(t.shape(), gen, DType::f64) * 0.5;
      Tensor ids = random_ids({2, 5}, 11, 8), targets = random_ids({2, 5}, 11, 9);
      // A training pass moves alpha_ma off 0; the check runs in evaluation mode, since in a
      // training pass alpha_ma depends on the parameters but by definition carries no gradient.
      st.training = true;
      st = model.apply(ids, ps, st).second;
      st.training = false;
      std::vector<std::string> names;
      std::vector<Tensor> inputs;
      for (const auto& [name, t] : ps) names.push_back(name), inputs.push_back(t);
      auto result = gradcheck([&](const std::vector<Tensor>& in) {
        Params p;
        for (size_t i = 0; i < names.size(); ++i) p.emplace(names[i], in[i]);
        return cross_entropy(model.apply(ids, p, st).first, targets);
      }, inputs);
      INFO(result.describe());
      CHECK(result.pass);
      CHECK(result.max_rel_err < 1e-6);
    }
  }
}

TEST_CASE("configs: JSON round trip, HF fields, presets and clear errors") {
  ModelConfig c = preset("llama3.2-1b");
  c.attention.kind = AttentionKind::affine;
  c.attention.phi = AlphaFn::sigmoid;
  ModelConfig back = ModelConfig::from_json(parse_json(c.to_json().dump()), "test");
  CHECK(back.to_json() == c.to_json());
  CHECK(back.rope_scaling.type == "llama3");
  CHECK(back.tie_word_embeddings);
  Json qwen = parse_json(R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32, "rope_scaling": null})");
  ModelConfig q = ModelConfig::from_json(qwen, "qwen.json");
  CHECK(q.qkv_bias);
  CHECK(q.num_kv_heads == 2);
  CHECK_THROWS_WITH_AS(preset("gpt-5"),
                       "[config] unknown preset 'gpt-5' (known: tiny-teacher, tiny-student, small-teacher, small-student, qwen1.5-0.5b, "
                       "qwen1.5-1.8b, llama3.2-1b, llama3.2-3b, llama3.1-8b)",
                       Error);
  CHECK_THROWS_WITH_AS(parse_attention_kind("flash"),
                       "[config] unknown attention kind 'flash' (known: softmax, sink, affine, gated, affine_gated)",
                       Error);
  Json missing = parse_json(R"({"vocab_size": 100})");
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(missing, "cfg.json"), "[config] cfg.json: missing field 'hidden_size'", Error);
  Json bad_heads = qwen;
  bad_heads["num_key_value_heads"] = 3;
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(bad_heads, "cfg.json"),
                       "[config] cfg.json: num_attention_heads 2 is not a multiple of num_key_value_heads 3", Error);
}

TEST_CASE("configs from untrusted files: dimensions bounded, sizes in checked arithmetic, the field named") {
  const Json base = parse_json(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 16,
      "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32})");
  auto error = [&](const char* field, const Json& value) {
    Json j = base;
    j[field] = value;
    try {
      ModelConfig::from_json(j, "bad/config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // 2^62 would make the embedding's byte count wrap to 0.
  CHECK(error("hidden_size", int64_t(1) << 62) ==
        "[config] bad/config.json: hidden_size 4611686018427387904 is above the limit of 16777216");
  CHECK(error("vocab_size", 0) == "[config] bad/config.json: vocab_size must be positive, got 0");
  CHECK(error("num_hidden_layers", -4) == "[config] bad/config.json: num_hidden_layers must be positive, got -4");
  CHECK(error("head_dim", -8) == "[config] bad/config.json: head_dim must be positive, got -8");
  CHECK(error("head_dim", 0) == "[config] bad/config.json: head_dim must be positive, got 0");
  CHECK(error("hidden_size", 15) ==
        "[config] bad/config.json: hidden_size 15 is not a multiple of num_attention_heads 2 (give head_dim)");
  CHECK(error("max_position_embeddings", -1) ==
        "[config] bad/config.json: max_position_embeddings must be positive, got -1");
  CHECK(error("rope_theta", -1.0) == "[config] bad/config.json: rope_theta must be a positive number, got -1");
  // Each dimension within bounds, but the product too large: the count is checked, not wrapped.
  Json huge = base;
  huge["hidden_size"] = 1 << 24;
  huge["intermediate_size"] = 1 << 24;
  huge["num_attention_heads"] = 1 << 12;
  huge["num_hidden_layers"] = 1 << 16;
  CHECK_THROWS_WITH_AS(ModelConfig::from_json(huge, "huge.json"),
                       "[config] huge.json: the model would have more than 1099511627776 parameters (2^40)", Error);
  // An explicit head_dim that differs from hidden_size / heads is kept; the same one is the default.
  Json wide = base;
  wide["head_dim"] = 32;
  CHECK(ModelConfig::from_json(wide, "wide.json").dim_per_head() == 32);
  wide["head_dim"] = 8;
  CHECK(ModelConfig::from_json(wide, "wide.json").head_dim == 0);
  // The checked count agrees with the model's parameter count (softmax adds nothing per head).
  for (const char* name : {"tiny-student", "qwen1.5-0.5b", "llama3.2-1b", "llama3.1-8b"}) {
    const ModelConfig p = preset(name);
    int64_t count = 0;
    REQUIRE(p.checked_parameter_count(count));
    CHECK(count == CausalLM(p).num_params());
  }
}

TEST_CASE("shapes: element counts and strides in checked arithmetic") {
  CHECK(numel({0, int64_t(1) << 62, 4}) == 0);
  CHECK_THROWS_WITH_AS(contiguous_strides({0, int64_t(1) << 62, 4}),
                       "[shape] shape [0, 4611686018427387904, 4] is too large to address: its strides overflow an int64",
                       Error);
  CHECK_THROWS_WITH_AS(numel({int64_t(1) << 32, int64_t(1) << 32}),
                       "[shape] shape [4294967296, 4294967296] has more elements than an int64 holds", Error);
  CHECK_THROWS_WITH_AS(Tensor::empty({int64_t(1) << 40, int64_t(1) << 20}),
                       "[empty] shape [1099511627776, 1048576] needs more than the limit of 281474976710656 bytes", Error);
  CHECK(contiguous_strides({3, 0, 2}) == Strides{0, 2, 1});
}

TEST_CASE("configs as transformers 4.x and 5.x write them: RoPE in both spellings, no field silently ignored") {
  const Json v4 = parse_json(R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 100,
      "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
      "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "hidden_act": "silu", "use_cache": true,
      "torch_dtype": "bfloat16", "transformers_version": "4.45.0", "bos_token_id": 1})");
  // transformers 5 moves rope_theta into rope_parameters and writes dtype.
  const Json v5 = parse_json(R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 100,
      "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32,
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "hidden_act": "silu", "dtype": "bfloat16",
      "transformers_version": "5.0.0"})");
  const ModelConfig a = ModelConfig::from_json(v4, "v4.json"), b = ModelConfig::from_json(v5, "v5.json");
  CHECK(b.rope_theta == 500000.0);
  CHECK(b.rope_scaling.type == "llama3");
  CHECK(b.rope_scaling.factor == 8.0);
  CHECK(a.to_json() == b.to_json());
  CHECK(a.unknown_fields.empty());
  CHECK(b.unknown_fields.empty());
  auto error = [](Json j, const char* field, const Json& value) {
    j[field] = value;
    try {
      ModelConfig::from_json(j, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(v5, "rope_theta", 10000.0) == "[config] c.json: rope_theta 10000 and rope_parameters.rope_theta 500000 disagree");
  CHECK(error(v4, "hidden_act", "gelu") ==
        "[config] c.json: hidden_act 'gelu' is not supported (supported: silu, gelu_pytorch_tanh, gelu_new)");
  CHECK(error(v4, "attention_dropout", 0.1) == "[config] c.json: attention_dropout 0.1 is not supported (cotan trains without dropout)");
  CHECK(error(v4, "architectures", Json::array({"MixtralForCausalLM"})) ==
        "[config] c.json: architectures 'MixtralForCausalLM' is not supported (supported: LlamaForCausalLM, "
        "Qwen2ForCausalLM, MistralForCausalLM, CotanForCausalLM)");
  CHECK(error(v4, "layer_types", Json::array({"full_attention", "sliding_attention"})) ==
        "[config] c.json: layer_types holds \"sliding_attention\": only full_attention layers are supported");
  Json yarn = v5;
  yarn["rope_parameters"]["rope_type"] = "yarn";
  CHECK(error(yarn, "vocab_size", 100) == "[config] c.json: unsupported rope type 'yarn' (supported: default, linear, llama3)");
  // Mistral's window applies whenever it is set; Qwen2's only with use_sliding_window.
  Json mistral = v4;
  mistral["model_type"] = "mistral";
  mistral["architectures"] = Json::array({"MistralForCausalLM"});
  mistral["max_position_embeddings"] = 32768;
  CHECK(error(mistral, "sliding_window", 4096) ==
        "[config] c.json: sliding_window 4096 is not supported (sliding-window attention; max_position_embeddings is 32768)");
  mistral["sliding_window"] = nullptr;
  CHECK(ModelConfig::from_json(mistral, "m.json").to_json()["architectures"][0] == "MistralForCausalLM");
  Json qwen = v4;
  qwen["model_type"] = "qwen2";
  qwen["architectures"] = Json::array({"Qwen2ForCausalLM"});
  qwen["sliding_window"] = 4096;
  qwen["max_position_embeddings"] = 32768;
  qwen["use_sliding_window"] = false;
  CHECK(ModelConfig::from_json(qwen, "q.json").qkv_bias);
  CHECK(error(qwen, "use_sliding_window", true) ==
        "[config] c.json: sliding_window 4096 is not supported (sliding-window attention; max_position_embeddings is 32768)");
  qwen["max_position_embeddings"] = 4096;  // a window as long as the context changes nothing
  CHECK(ModelConfig::from_json(qwen, "q.json").max_position_embeddings == 4096);
  // Fields nobody reads are listed, not refused.
  Json extra = v4;
  extra["quantization_config"] = Json::object();
  extra["num_experts"] = 8;
  CHECK(ModelConfig::from_json(extra, "e.json").unknown_fields == std::vector<std::string>{"quantization_config", "num_experts"});
}

TEST_CASE("Llama's attention_bias puts a bias on o_proj too; linear RoPE slows every frequency by its factor") {
  const Json j = parse_json(R"({"model_type": "llama", "vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32, "attention_bias": true,
      "rope_scaling": {"type": "linear", "factor": 4.0}})");
  const ModelConfig c = ModelConfig::from_json(j, "bias.json");
  bool o_bias = false, q_bias = false;
  const CausalLM model(c);
  for (const ParamSpec& s : model.param_specs()) {
    o_bias |= s.name == "model.layers.0.self_attn.o_proj.bias";
    q_bias |= s.name == "model.layers.0.self_attn.q_proj.bias";
  }
  CHECK(o_bias);
  CHECK(q_bias);
  int64_t count = 0;
  REQUIRE(c.checked_parameter_count(count));
  CHECK(count == model.num_params());
  CHECK(ModelConfig::from_json(c.to_json(), "again.json").to_json() == c.to_json());
  Rope plain{8, 10000.0, RopeScaling{}}, linear{8, 10000.0, c.rope_scaling};
  const auto f = plain.inverse_frequencies(), g = linear.inverse_frequencies();
  REQUIRE(f.size() == 4);
  for (size_t i = 0; i < f.size(); ++i) CHECK(g[i] == doctest::Approx(std::pow(10000.0, -double(2 * i) / 8) / 4).epsilon(1e-15));
}

// A frozen model's stacked projections laid out side by side (nn::adjoin): every weight keeps its
// values, each joint product's stack is then a view of one buffer, and the model computes the
// same bits (and the same gradients of its input) as with the weights apart.
TEST_CASE("adjoin: joint weights side by side, read in place, the same bits") {
  for (const AttentionKindInfo& info : attention_kinds()) {
    CAPTURE(name_of(info.kind));
    CausalLM model(micro(info.kind));
    Generator gen(17);
    auto [ps, st] = model.init(gen, DType::f32);
    const std::vector<std::vector<std::string>> groups = model.joint_weight_groups();
    REQUIRE(groups.size() == 4);  // attention and MLP of each of the 2 layers
    CHECK(groups[1] ==
          std::vector<std::string>{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"});
    CHECK(groups[0].size() == size_t(3 + (info.core == CoreKind::affine) + info.gated));
    const Params joint = adjoin(ps, groups);
    for (const auto& [name, t] : ps) CHECK(same_values(joint.at(name), t));
    for (const std::vector<std::string>& group : groups) {
      std::vector<Tensor> stack;
      for (const std::string& name : group) stack.push_back(joint.at(name));
      const Tensor whole = concat(stack, 0);
      CHECK(whole.same_storage(stack[0]));
      std::vector<Tensor> apart;
      for (const std::string& name : group) apart.push_back(ps.at(name));
      const Tensor copied = concat(apart, 0);
      CHECK(!copied.same_storage(apart[0]));
      CHECK(max(abs(whole - copied)).item<double>() == 0.0);
    }
    const Tensor ids = random_ids({2, 9}, 11, 3);
    CHECK(max(abs(model.apply(ids, joint, st).first - model.apply(ids, ps, st).first)).item<double>() == 0.0);
  }

  CausalLM model(micro(AttentionKind::softmax));
  Generator gen(18);
  Params ps = model.init(gen, DType::f32).first;
  CHECK_THROWS_WITH_AS(adjoin(ps, {{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight"}}),
                       doctest::Contains("'model.layers.0.mlp.down_proj.weight' ([8, 12]"), Error);
  CHECK_THROWS_WITH_AS(adjoin(ps, {{"model.layers.0.mlp.gate_proj.weight", "nope"}}),
                       doctest::Contains("missing parameter 'nope'"), Error);
}

// concat of inputs that already lie side by side is a view; its gradients are the same slices.
TEST_CASE("concat of adjacent slices: a view, with the gradients of a copy") {
  Generator gen(19);
  const Tensor base = randn({7, 3}, gen, DType::f64);
  auto parts_of = [](const Tensor& x) {
    return std::vector<Tensor>{slice(x, 0, 0, 2), slice(x, 0, 2, 3), slice(x, 0, 3, 7)};
  };
  const Tensor w = randn({7, 3}, gen, DType::f64);
  auto [value, grads] =
      value_and_grad([&](const std::vector<Tensor>& in) { return sum(concat(parts_of(in[0]), 0) * w); }, {base});
  CHECK(value.item<double>() == doctest::Approx(sum(base * w).item<double>()).epsilon(1e-14));
  CHECK(max(abs(grads[0] - w)).item<double>() == 0.0);
  CHECK(concat(parts_of(base), 0).same_storage(base));
  // Out of order, or not side by side: copied.
  const std::vector<Tensor> p = parts_of(base);
  CHECK(!concat({p[1], p[0], p[2]}, 0).same_storage(base));
  CHECK(!concat({p[0], p[2]}, 0).same_storage(base));
  // The copy holds rows 0, 1 and 3..6 of base, read back element by element.
  const std::vector<double> all = base.to_vector<double>(), gapped = concat({p[0], p[2]}, 0).to_vector<double>();
  std::vector<double> expected(all.begin(), all.begin() + 2 * 3);
  expected.insert(expected.end(), all.begin() + 3 * 3, all.end());
  CHECK(gapped == expected);
}
