// The fused CPU attention (nn/attention_fused.cpp, kernels in tensor/cpu/attention.cpp) against its composed oracle
// (nn/attention_composed.cpp) for every kind, masking, GQA layout and affine count, in f64 and
// f32; gradcheck of the fused pullback; the identities of docs/attention.md (affine weight sums,
// sink -> softmax, GQA = repeated MHA, causality, with a wrong affine variant that must fail the
// causality check); attention_stats against statistics computed here from materialized weights.
// Sizes straddle the tiles (32 queries x 64 keys, 16 f32 / 8 f64 lanes of d).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "nn/attention.hpp"
#include "tensor/ops.hpp"
#include "tests/attention_cases.hpp"
#include "tests/support.hpp"

using namespace cotan;
using namespace cotan::nn;
using namespace attention_cases;

namespace {

// [B, Hkv, T, d] -> [B, H, T, d], each kv head repeated H / Hkv times.
Tensor repeat_heads(const Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), hkv = x.size(1), t = x.size(2), d = x.size(3);
  return contiguous(reshape(broadcast_to(unsqueeze(x, 2), {b, hkv, heads / hkv, t, d}), {b, heads, t, d}));
}

// [B, H, T, d] -> [B, Hkv, T, d], summing each group of H / Hkv heads (the transpose of repeat_heads).
Tensor sum_heads(const Tensor& x, int64_t kv_heads) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  return sum(reshape(x, {b, kv_heads, h / kv_heads, t, d}), {2});
}

std::vector<Case> all_variants(int64_t batch, int64_t t, int64_t d) {
  std::vector<Case> out;
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (bool causal : {true, false})
      for (int64_t kv_heads : {int64_t(2), int64_t(4)})
        for (AffineN n : {AffineN::visible, AffineN::full}) {
          if (kind != Kind::affine && n == AffineN::full) continue;
          out.push_back(Case{kind, causal, batch, 4, kv_heads, t, d, n});
        }
  return out;
}

struct Sizes {
  int64_t batch, t, d;
};
// T = 1, 7, 33, 70 (not multiples of the 32 x 64 tiles), d off and on the lane widths, and T
// past two key tiles and four query tiles.
const Sizes kSizes[] = {{2, 1, 4}, {2, 7, 5}, {1, 33, 8}, {1, 70, 16}, {1, 130, 64}};

}  // namespace

TEST_CASE("attention_fused matches attention_composed: forward and gradients") {
  uint64_t seed = 100;
  for (const Sizes& size : kSizes)
    for (const Case& c : all_variants(size.batch, size.t, size.d))
      for (DType dt : {DType::f64, DType::f32}) {
        INFO(c.str(), " ", dt);
        const AttentionCore core = make_core(c, dt, ++seed);
        Generator gen(seed + 7);
        const Tensor cotangent = cast(randn(core.q.shape(), gen, DType::f64), dt);
        auto [fused, fused_grads] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);
        auto [composed, composed_grads] =
            vjp(as_function(core, attention_composed), differentiable_inputs(core), cotangent);
        CHECK(fused.dtype() == dt);
        const double forward_tol = dt == DType::f64 ? 1e-12 : 1e-5, grad_tol = dt == DType::f64 ? 1e-12 : 1e-4;
        CHECK(rel_diff(fused, composed) <= forward_tol);
        REQUIRE(fused_grads.size() == composed_grads.size());
        for (size_t i = 0; i < fused_grads.size(); ++i) {
          INFO("input ", i);
          CHECK(fused_grads[i].dtype() == dt);
          CHECK(rel_diff(fused_grads[i], composed_grads[i]) <= grad_tol);
        }
      }
}

TEST_CASE("attention_fused passes gradcheck for every kind") {
  uint64_t seed = 500;
  std::vector<Case> cases;
  for (const Case& c : all_variants(1, 7, 3)) cases.push_back(c);
  // One problem across tiles: two query tiles and a partial second key tile.
  cases.push_back(Case{Kind::affine, true, 1, 2, 1, 70, 2, AffineN::visible});
  cases.push_back(Case{Kind::sink, false, 1, 2, 1, 70, 2, AffineN::visible});
  for (const Case& c : cases) {
    INFO(c.str());
    const AttentionCore core = make_core(c, DType::f64, ++seed);
    GradcheckResult r = gradcheck(as_function(core, attention_fused), differentiable_inputs(core));
    INFO(r.describe());
    CHECK(r.pass);
  }
}

TEST_CASE("affine with N = visible: every query's weights sum to alpha_ma") {
  for (bool causal : {true, false})
    for (AffineN n : {AffineN::visible, AffineN::full}) {
      Case c{Kind::affine, causal, 2, 1, 1, 33, 8, n};
      INFO(c.str());
      const AttentionCore core = make_core(c, DType::f64, 900 + (causal ? 1 : 0));
      const AttentionStats stats = attention_stats(core);
      const std::vector<double> sums = stats.weight_sums.to_vector<double>();
      const std::vector<double> alpha = core.alpha.to_vector<double>();
      const double alpha_ma = core.alpha_ma.to_vector<double>()[0];
      REQUIRE(sums.size() == size_t(c.batch * c.t));
      double worst = 0;
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t i = 0; i < c.t; ++i) {
          // sum_j A_ij = alpha_i + beta_i |J_i| = alpha_ma when N_i = |J_i|.
          const double a = alpha[size_t(b * c.t + i)], visible = causal ? double(i + 1) : double(c.t);
          const double expected = n == AffineN::visible ? alpha_ma : a + (alpha_ma - a) * visible / double(c.t);
          worst = std::max(worst, std::abs(sums[size_t(b * c.t + i)] - expected));
        }
      CHECK(worst <= 1e-13);
    }
}

TEST_CASE("sink with sigma = -1e9 is softmax") {
  for (bool causal : {true, false}) {
    Case c{Kind::sink, causal, 2, 4, 2, 70, 8, AffineN::visible};
    AttentionCore sink = make_core(c, DType::f64, 31);
    sink.sigma = full({c.heads}, -1e9, DType::f64);
    AttentionCore plain = sink;
    plain.sigma = Tensor();
    Generator gen(32);
    const Tensor cotangent = randn(sink.q.shape(), gen, DType::f64);
    auto [with_sink, sink_grads] = vjp(as_function(sink, attention_fused), differentiable_inputs(sink), cotangent);
    auto [softmax, softmax_grads] = vjp(as_function(plain, attention_fused), differentiable_inputs(plain), cotangent);
    CHECK(rel_diff(with_sink, softmax) <= 1e-15);
    for (size_t i = 0; i < 3; ++i) CHECK(rel_diff(sink_grads[i], softmax_grads[i]) <= 1e-15);
    CHECK(max_abs_diff(sink_grads[3], zeros({c.heads}, DType::f64)) == 0.0);
  }
}

TEST_CASE("GQA equals MHA with K and V repeated") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (bool causal : {true, false}) {
      Case c{kind, causal, 2, 4, 2, 33, 8, AffineN::visible};
      INFO(c.str());
      const AttentionCore gqa = make_core(c, DType::f64, 41);
      AttentionCore mha = gqa;
      mha.k = repeat_heads(gqa.k, c.heads);
      mha.v = repeat_heads(gqa.v, c.heads);
      Generator gen(42);
      const Tensor cotangent = randn(gqa.q.shape(), gen, DType::f64);
      auto [y_gqa, g_gqa] = vjp(as_function(gqa, attention_fused), differentiable_inputs(gqa), cotangent);
      auto [y_mha, g_mha] = vjp(as_function(mha, attention_fused), differentiable_inputs(mha), cotangent);
      CHECK(rel_diff(y_gqa, y_mha) <= 1e-14);
      CHECK(rel_diff(g_gqa[0], g_mha[0]) <= 1e-14);
      CHECK(rel_diff(g_gqa[1], sum_heads(g_mha[1], c.kv_heads)) <= 1e-13);
      CHECK(rel_diff(g_gqa[2], sum_heads(g_mha[2], c.kv_heads)) <= 1e-13);
      for (size_t i = 3; i < g_gqa.size(); ++i) CHECK(rel_diff(g_gqa[i], g_mha[i]) <= 1e-13);
    }
}

namespace {

// The largest change, over positions 0 .. T-2, of f's output when the last token's q, k, v (and
// alpha, in (0, 1)) are redrawn. A causal function gives zero.
double leak_into_past(const AttentionCore& core, const std::function<Tensor(const AttentionCore&)>& f) {
  const int64_t t = core.q.size(2);
  Generator gen(77);
  auto redraw_last = [&](const Tensor& x) {
    Shape shape = x.shape();
    shape[2] = 1;
    Tensor fresh = randn(shape, gen, x.dtype());
    return concat({slice(x, 2, 0, t - 1), x.dim() == 3 ? sigmoid(fresh) : fresh}, 2);
  };
  AttentionCore changed = core;
  changed.q = redraw_last(core.q);
  changed.k = redraw_last(core.k);
  changed.v = redraw_last(core.v);
  if (core.alpha.defined()) changed.alpha = redraw_last(core.alpha);
  return max_abs_diff(slice(f(core), 2, 0, t - 1), slice(f(changed), 2, 0, t - 1));
}

// Affine with the bias added to every key, masked ones included: future values leak into the
// past (O_i = alpha_i S_i + beta_i sum over all j of v_j).
Tensor affine_bias_on_masked_keys(const AttentionCore& in) {
  AttentionCore plain = in;
  plain.alpha = Tensor();
  plain.alpha_ma = Tensor();
  const Tensor s = attention_composed(plain);
  const int64_t h = in.q.size(1), t = in.q.size(2);
  const Tensor v = repeat_heads(in.v, h);
  const Tensor n = reshape(cast(arange(1, t + 1, 1, DType::i64), in.q.dtype()), {1, 1, t});
  const Tensor beta = (reshape(in.alpha_ma, {1, h, 1}) - in.alpha) / n;
  return unsqueeze(in.alpha, -1) * s + unsqueeze(beta, -1) * broadcast_to(sum(v, {2}, true), v.shape());
}

}  // namespace

TEST_CASE("causality: the last token changes no earlier output") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (AffineN n : {AffineN::visible, AffineN::full})
      for (int64_t t : {int64_t(7), int64_t(70)}) {
        if (kind != Kind::affine && n == AffineN::full) continue;
        Case c{kind, true, 2, 4, 2, t, 8, n};
        INFO(c.str());
        const AttentionCore core = make_core(c, DType::f64, 61);
        CHECK(leak_into_past(core, attention_fused) <= 1e-300);
        CHECK(leak_into_past(core, attention_composed) <= 1e-300);
        // The same perturbation does reach the last position (outputs shifted by one).
        auto shifted = [](const AttentionCore& x) { return slice(attention_fused(x), 2, 1, x.q.size(2)); };
        CHECK(leak_into_past(core, shifted) > 1e-3);
      }
  // The check can fail: the bias on masked keys leaks the future into the past.
  Case c{Kind::affine, true, 2, 4, 2, 33, 8, AffineN::visible};
  CHECK(leak_into_past(make_core(c, DType::f64, 62), affine_bias_on_masked_keys) > 1e-3);
}

namespace {

// The statistics of docs/attention.md from the weights A materialized with loops, in f64.
AttentionStats reference_stats(const AttentionCore& in) {
  const int64_t batch = in.q.size(0), heads = in.q.size(1), kv = in.k.size(1), t = in.q.size(2), d = in.q.size(3);
  const std::vector<double> q = in.q.to_vector<double>(), k = in.k.to_vector<double>();
  const std::vector<double> alpha = in.alpha.defined() ? in.alpha.to_vector<double>() : std::vector<double>();
  const std::vector<double> alpha_ma = in.alpha_ma.defined() ? in.alpha_ma.to_vector<double>() : std::vector<double>();
  const std::vector<double> sigma = in.sigma.defined() ? in.sigma.to_vector<double>() : std::vector<double>();
  const double c = 1 / std::sqrt(double(d));
  AttentionStats out;
  std::vector<double> head_mass(size_t(heads), 0.0), weight_sums(size_t(batch * t), 0.0);
  std::vector<double> row_sums(size_t(batch * heads * t), 0.0), weights(size_t(t * t), 0.0);
  double first = 0, share = 0, shared_rows = 0, entropy = 0, logits = 0, visible_pairs = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kv);
      for (int64_t i = 0; i < t; ++i) {
        const int64_t visible = in.causal ? i + 1 : t;
        std::vector<double> s(static_cast<size_t>(visible));
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += q[size_t(((b * heads + h) * t + i) * d + x)] * k[size_t(((b * kv + g) * t + j) * d + x)];
          s[size_t(j)] = c * dot;
          logits += s[size_t(j)];
        }
        visible_pairs += double(visible);
        double denominator = sigma.empty() ? 0.0 : std::exp(sigma[size_t(h)]);
        for (double x : s) denominator += std::exp(x);
        std::vector<double> a(static_cast<size_t>(visible));
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(s[size_t(j)]) / denominator;
          if (alpha.empty()) {
            a[size_t(j)] = p;
          } else {
            const double al = alpha[size_t((b * heads + h) * t + i)];
            const double n = in.affine_n == AffineN::visible ? double(visible) : double(t);
            a[size_t(j)] = al * p + (alpha_ma[size_t(h)] - al) / n;
          }
        }
        double mass = 0, z = 0;
        for (double w : a) {
          mass += w;
          z += std::max(w, 0.0);
        }
        double row_entropy = 0;
        for (double w : a)
          if (w > 0) row_entropy -= w / z * std::log(w / z);
        if (i >= 1) first += a[0];
        if (i >= 1 && mass > 0) {
          share += a[0] / mass;
          shared_rows += 1;
        }
        entropy += row_entropy;
        head_mass[size_t(h)] += mass / double(batch * t);
        weight_sums[size_t(b * t + i)] += mass / double(heads);
        row_sums[size_t((b * heads + h) * t + i)] = mass;
        if (b == 0)
          for (int64_t j = 0; j < visible; ++j) weights[size_t(i * t + j)] += a[size_t(j)] / double(heads);
      }
    }
  out.first_token_weight = t > 1 ? first / double(batch * heads * (t - 1)) : 0.0;
  out.first_token_share = shared_rows > 0 ? share / shared_rows : std::nan("");
  out.entropy = entropy / double(batch * heads * t);
  out.mean_logit = logits / visible_pairs;
  out.head_mass = from_vector(head_mass, {heads});
  out.weight_sums = from_vector(weight_sums, {batch, t});
  out.row_sums = from_vector(row_sums, {batch, heads, t});
  out.weights = from_vector(weights, {t, t});
  return out;
}

}  // namespace

TEST_CASE("attention_stats matches weights materialized in the test") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (bool causal : {true, false})
      for (AffineN n : {AffineN::visible, AffineN::full}) {
        if (kind != Kind::affine && n == AffineN::full) continue;
        Case c{kind, causal, 2, 4, 2, 70, 5, n};
        INFO(c.str());
        AttentionCore core = make_core(c, DType::f64, 71);
        if (kind == Kind::affine) {
          // alpha_ma below alpha in places, so that some weights are negative and max(A, 0) matters.
          Generator gen(72);
          core.alpha_ma = rand({c.heads}, gen, DType::f64) * 0.2;
        }
        const AttentionStats got = attention_stats(core), want = reference_stats(core);
        CHECK(std::abs(got.first_token_weight - want.first_token_weight) <= 1e-12);
        CHECK(std::abs(got.first_token_share - want.first_token_share) <= 1e-12);
        if (kind == Kind::softmax) CHECK(std::abs(got.first_token_share - got.first_token_weight) <= 1e-12);
        CHECK(std::abs(got.entropy - want.entropy) <= 1e-12);
        CHECK(std::abs(got.mean_logit - want.mean_logit) <= 1e-12);
        CHECK(got.head_mass.dtype() == DType::f64);
        CHECK(got.weight_sums.dtype() == DType::f64);
        CHECK(max_abs_diff(got.head_mass, want.head_mass) <= 1e-12);
        CHECK(max_abs_diff(got.weight_sums, want.weight_sums) <= 1e-12);
        CHECK(got.row_sums.shape() == want.row_sums.shape());
        CHECK(max_abs_diff(got.row_sums, want.row_sums) <= 1e-12);
        CHECK(!got.weights.defined());  // only on request
        const AttentionStats with_weights = attention_stats(core, true);
        REQUIRE(with_weights.weights.defined());
        CHECK(with_weights.weights.dtype() == DType::f64);
        CHECK(max_abs_diff(with_weights.weights, want.weights) <= 1e-12);
        // The serial pass over batch row 0 changes none of the other numbers.
        CHECK(with_weights.entropy == got.entropy);
        CHECK(max_abs_diff(with_weights.row_sums, got.row_sums) == 0.0);
        // f32 inputs give the same statistics to f32 accuracy.
        const AttentionCore single = cast(core, DType::f32);
        const AttentionStats f32 = attention_stats(single);
        CHECK(std::abs(f32.entropy - want.entropy) <= 1e-4);
        CHECK(max_abs_diff(f32.weight_sums, want.weight_sums) <= 1e-4);
      }
}

// B * Hkv = 4 tasks: on 1 thread the forward runs one task per kv head (its 3 query heads sharing
// the packed K and V), on 2 one per query head; both give the same bits, and match the composed core.
TEST_CASE("attention_fused: the same bits with 1 and 2 threads") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine}) {
    INFO(kind_name(kind));
    Case c{kind, true, 2, 6, 2, 70, 16, AffineN::visible};
    const AttentionCore core = make_core(c, DType::f32, 81);
    Generator gen(82);
    const Tensor cotangent = randn(core.q.shape(), gen, DType::f32);
    const int before = num_threads();
    set_num_threads(1);
    auto [y1, g1] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);
    const AttentionStats s1 = attention_stats(core);
    set_num_threads(2);
    auto [y2, g2] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);
    const AttentionStats s2 = attention_stats(core);
    set_num_threads(before);
    auto [composed, composed_grads] =
        vjp(as_function(core, attention_composed), differentiable_inputs(core), cotangent);
    CHECK(rel_diff(y1, composed) <= 1e-5);
    for (size_t i = 0; i < g1.size(); ++i) CHECK(rel_diff(g1[i], composed_grads[i]) <= 1e-4);
    CHECK(max_abs_diff(y1, y2) == 0.0);
    for (size_t i = 0; i < g1.size(); ++i) CHECK(max_abs_diff(g1[i], g2[i]) == 0.0);
    CHECK(s1.entropy == s2.entropy);
    CHECK(max_abs_diff(s1.weight_sums, s2.weight_sums) == 0.0);
    set_num_threads(1);
    const AttentionStats w1 = attention_stats(core, true);
    set_num_threads(2);
    const AttentionStats w2 = attention_stats(core, true);
    set_num_threads(before);
    CHECK(max_abs_diff(w1.weights, w2.weights) == 0.0);
  }
}

TEST_CASE("attention_fused in bf16 computes in f32") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine}) {
    Case c{kind, true, 1, 4, 2, 33, 16, AffineN::visible};
    INFO(c.str());
    const AttentionCore core = make_core(c, DType::bf16, 91);
    const AttentionCore wide = cast(core, DType::f32);
    Generator gen(92);
    const Tensor cotangent = cast(randn(core.q.shape(), gen, DType::f32), DType::bf16);
    auto [y, grads] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);
    auto [y_wide, grads_wide] =
        vjp(as_function(wide, attention_composed), differentiable_inputs(wide), cast(cotangent, DType::f32));
    CHECK(y.dtype() == DType::bf16);
    CHECK(rel_diff(y, y_wide) <= 1e-2);
    for (size_t i = 0; i < grads.size(); ++i) {
      CHECK(grads[i].dtype() == DType::bf16);
      CHECK(rel_diff(grads[i], grads_wide[i]) <= 2e-2);
    }
  }
}

TEST_CASE("attention_fused: inputs are checked, alpha_ma gets no gradient") {
  Case c{Kind::affine, true, 1, 4, 2, 7, 5, AffineN::visible};
  const AttentionCore core = make_core(c, DType::f64, 95);
  AttentionCore bad = core;
  Generator gen(96);
  bad.k = randn({1, 3, 7, 5}, gen, DType::f64);
  CHECK_THROWS_WITH_AS(attention_fused(bad), doctest::Contains("[attention]"), Error);
  bad = core;
  bad.alpha_ma = Tensor();
  CHECK_THROWS_AS(attention_fused(bad), Error);
  bad = core;
  bad.v = cast(core.v, DType::f32);
  CHECK_THROWS_AS(attention_fused(bad), Error);

  // A tracked alpha_ma is read as a constant: its gradient is zero.
  auto loss = [&](const std::vector<Tensor>& xs) {
    AttentionCore x = core;
    x.alpha_ma = xs[0];
    return sum(attention_fused(x));
  };
  const std::vector<Tensor> grads = value_and_grad(loss, {core.alpha_ma}).second;
  CHECK(max_abs_diff(grads[0], zeros_like(core.alpha_ma)) == 0.0);
}

TEST_CASE("attention_fused reads strided inputs and cotangents in place") {
  // q, k and v as the model hands them over: slices of one joint projection [B, T, H d + 2 Hkv d
  // + extra] (rows a width apart that is no multiple of a cache line), viewed as [B, H, T, d]; the
  // cotangent as o_proj's backward hands it back, [B, T, H, d] in memory. The fused core must give
  // the bits it gives for contiguous copies of the same values, and the composed core's values.
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (DType dt : {DType::f64, DType::f32}) {
      Case c{kind, true, 2, 4, 2, 33, 8, AffineN::visible};
      INFO(c.str(), " ", dt);
      const AttentionCore core = make_core(c, dt, 97);
      const int64_t b = c.batch, t = c.t, d = c.d, extra = 3;
      auto tokens_first = [&](const Tensor& x) { return reshape(permute(x, {0, 2, 1, 3}), {b, t, x.size(1) * d}); };
      Generator gen(98);
      const Tensor joint = contiguous(concat({tokens_first(core.q), tokens_first(core.k), tokens_first(core.v),
                                              randn({b, t, extra}, gen, dt)},
                                             2));
      AttentionCore strided = core;
      auto heads_view = [&](int64_t from, int64_t heads) {
        return permute(reshape(slice(joint, 2, from * d, (from + heads) * d), {b, t, heads, d}), {0, 2, 1, 3});
      };
      strided.q = heads_view(0, c.heads);
      strided.k = heads_view(c.heads, c.kv_heads);
      strided.v = heads_view(c.heads + c.kv_heads, c.kv_heads);
      REQUIRE(!strided.q.is_contiguous());
      REQUIRE(max_abs_diff(strided.v, core.v) == 0.0);
      const Tensor cotangent = randn(core.q.shape(), gen, dt);
      const Tensor cotangent_strided = permute(contiguous(permute(cotangent, {0, 2, 1, 3})), {0, 2, 1, 3});
      REQUIRE(!cotangent_strided.is_contiguous());

      auto [y, grads] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);
      auto [y_strided, grads_strided] =
          vjp(as_function(strided, attention_fused), differentiable_inputs(strided), cotangent_strided);
      CHECK(max_abs_diff(y, y_strided) == 0.0);
      for (size_t i = 0; i < grads.size(); ++i) CHECK(max_abs_diff(grads[i], grads_strided[i]) == 0.0);

      auto [composed, composed_grads] =
          vjp(as_function(core, attention_composed), differentiable_inputs(core), cotangent);
      const double tol = dt == DType::f64 ? 1e-12 : 1e-4;
      CHECK(rel_diff(y_strided, composed) <= tol);
      for (size_t i = 0; i < grads.size(); ++i) CHECK(rel_diff(grads_strided[i], composed_grads[i]) <= tol);
    }
}
