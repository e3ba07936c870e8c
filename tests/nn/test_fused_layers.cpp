// The fused row ops (nn/fused.hpp) against their composed oracles: forward and gradients in f64,
// f32 and bf16 on fresh random inputs, contiguous, strided and broadcast; gradcheck of each
// pullback; error messages; the same bits with 1 and 2 threads; and the layers that use them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "nn/fused.hpp"
#include "nn/layers.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

using namespace cotan;
using namespace cotan::nn;

namespace {

using X = const std::vector<Tensor>&;

// max |a - b| / max(max |b|, 1e-30), in f64: normwise, so that entries near 0 (where a gradient
// cancels) are judged against the scale of the whole tensor.
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = cast(a.detach(), DType::f64).to_vector<double>();
  const std::vector<double> y = cast(b.detach(), DType::f64).to_vector<double>();
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    err = std::max(err, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return err / scale;
}

double tolerance(DType dt) { return dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 1e-5 : 1e-2; }

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = contiguous(a.detach()), y = contiguous(b.detach());
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

Tensor normal(const Shape& shape, Generator& gen, DType dt, double scale = 1.0) {
  return cast(randn(shape, gen, DType::f64) * scale, dt);
}

// `source` viewed through a transposed layout: the same values, non-unit strides.
Tensor strided_copy(const Tensor& source) {
  return transpose(contiguous(transpose(source, 0, -1)), 0, -1);
}

// The fused and composed functions on the same inputs: values, and the vjp with one random
// cotangent, within the dtype's tolerance; the fused results keep the composed dtypes. The bf16
// gradients are judged against the composed ops run in f64 on the same (bf16) values: composed in
// bf16, every intermediate op rounds to bf16 (silu's pullback alone is six of them), and that
// oracle's own error reaches the tolerance, where the fused pullback rounds once.
void expect_matches(const Function& fused, const Function& composed, const std::vector<Tensor>& inputs,
                    uint64_t seed, const std::string& what) {
  INFO(what);
  const DType dt = inputs[0].dtype();
  const Tensor probe = composed(inputs);
  Generator gen(seed);
  const Tensor cotangent = normal(probe.shape(), gen, probe.dtype());
  auto [y, grads] = vjp(fused, inputs, cotangent);
  auto [y_ref, grads_ref] = vjp(composed, inputs, cotangent);
  CHECK(y.dtype() == y_ref.dtype());
  CHECK(y.shape() == y_ref.shape());
  CHECK(rel_diff(y, y_ref) <= tolerance(dt));
  REQUIRE(grads.size() == grads_ref.size());
  std::vector<Tensor> grads_exact = grads_ref;
  if (dt == DType::bf16) {
    std::vector<Tensor> wide;
    for (const Tensor& x : inputs) wide.push_back(cast(x, DType::f64));
    grads_exact = vjp(composed, wide, cast(cotangent, DType::f64)).second;
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    INFO("gradient of input ", i);
    CHECK(grads[i].dtype() == grads_ref[i].dtype());
    CHECK(rel_diff(grads[i], grads_exact[i]) <= tolerance(dt));
  }
}

constexpr DType kDtypes[] = {DType::f64, DType::f32, DType::bf16};

// ---- the three ops as Functions ----

constexpr double kEps = 1e-5;

Function rms_fused = [](X x) { return rms_norm(x[0], x[1], kEps); };
Function rms_composed = [](X x) { return rms_norm_composed(x[0], x[1], kEps); };
Function swiglu_fused = [](X x) { return swiglu(x[0], x[1]); };
Function swiglu_reference = [](X x) { return swiglu_composed(x[0], x[1]); };

// The composed version takes the tables in x's dtype (its f64 run for the bf16 oracle).
Function rope_of(const Tensor& cos, const Tensor& sin, bool fused) {
  return [cos, sin, fused](X x) {
    const DType dt = x[0].dtype();
    return fused ? rope(x[0], cos, sin) : rope_composed(x[0], cast(cos, dt), cast(sin, dt));
  };
}

}  // namespace

TEST_CASE("rms_norm matches the composed RMSNorm: forward and gradients") {
  uint64_t seed = 10;
  // D below, at and past the eight f64 lanes of the row sums. (D = 1 is left out: there
  // dx = w eps / (x^2 + eps)^(3/2) is a cancellation that neither version resolves in f32.)
  for (int64_t dim : {3, 8, 37, 130})
    for (DType dt : kDtypes) {
      Generator gen(++seed);
      const Tensor weight = cast(1.0 + randn({dim}, gen, DType::f64) * 0.3, dt);
      const Tensor x = normal({2, 3, dim}, gen, dt, 2.0);
      const std::string what = cat(dt, " D=", dim);
      expect_matches(rms_fused, rms_composed, {x, weight}, seed, what + " contiguous");
      expect_matches(rms_fused, rms_composed, {strided_copy(x), weight}, seed, what + " strided");
      // Leading dims broadcast from one slice: the x gradient sums over them.
      const Tensor one = normal({1, 3, dim}, gen, dt);
      expect_matches([](X v) { return rms_norm(expand(v[0], {4, 3, v[0].size(-1)}), v[1], kEps); },
                     [](X v) { return rms_norm_composed(expand(v[0], {4, 3, v[0].size(-1)}), v[1], kEps); },
                     {one, weight}, seed, what + " broadcast");
      // A 1-D x is one row.
      expect_matches(rms_fused, rms_composed, {normal({dim}, gen, dt), weight}, seed, what + " one row");
    }
}

TEST_CASE("rms_norm keeps the composed dtypes: bf16 in, bf16 out, normalized in f32") {
  Generator gen(3);
  const Tensor x = normal({4, 16}, gen, DType::bf16, 50.0), weight = normal({16}, gen, DType::bf16);
  const Tensor y = rms_norm(x, weight, 1e-6);
  CHECK(y.dtype() == DType::bf16);
  // Normalized in f32, rounded to bf16, then times the weight: the composed value to a bf16
  // rounding (the composed rsqrt is Eigen's, the fused one the exact 1 / sqrt).
  CHECK(rel_diff(y, rms_norm_composed(x, weight, 1e-6)) <= 1e-2);
  // The f32 normalization rounded once: within half a bf16 ulp of the f64 result, times the weight.
  const Tensor exact = rms_norm(cast(x, DType::f64), cast(cast(weight, DType::f32), DType::f64), 1e-6);
  CHECK(rel_diff(y, exact) <= 1e-2);
  CHECK(rms_norm(cast(x, DType::f64), cast(weight, DType::f64), 1e-6).dtype() == DType::f64);
}

TEST_CASE("swiglu matches silu(g) * u: forward and gradients") {
  uint64_t seed = 40;
  for (DType dt : kDtypes) {
    Generator gen(++seed);
    // Values out to |g| ~ 12, where sigmoid saturates.
    const Tensor g = normal({3, 5, 67}, gen, dt, 4.0), u = normal({3, 5, 67}, gen, dt);
    const std::string what = cat(dt);
    expect_matches(swiglu_fused, swiglu_reference, {g, u}, seed, what + " contiguous");
    expect_matches(swiglu_fused, swiglu_reference, {strided_copy(g), u}, seed, what + " strided");
    // Broadcast leading dims on both sides: [2, 1, 5, 67] and [3, 5, 67] -> [2, 3, 5, 67].
    expect_matches(swiglu_fused, swiglu_reference, {normal({2, 1, 5, 67}, gen, dt), g}, seed, what + " broadcast");
    // More elements than one parallel chunk.
    expect_matches(swiglu_fused, swiglu_reference, {normal({70000}, gen, dt), normal({70000}, gen, dt)}, seed,
                   what + " long");
    // g and u as the two halves of one joint projection [..., 2 width], read in place; rows wider
    // than a tile and more rows than one parallel chunk.
    for (const Shape& joint_shape : {Shape{3, 5, 134}, Shape{2, 150, 600}}) {
      const Tensor joint = normal(joint_shape, gen, dt, 4.0);
      const int64_t width = joint_shape.back() / 2;
      expect_matches(
          [width](X x) { return swiglu(slice(x[0], -1, 0, width), slice(x[0], -1, width, 2 * width)); },
          [width](X x) { return swiglu_composed(slice(x[0], -1, 0, width), slice(x[0], -1, width, 2 * width)); },
          {joint}, seed, what + " halves of " + to_string(joint_shape));
    }
  }
}

// The joint gate/up projection's halves: the kernels read them in place and return their
// cotangents side by side in one buffer of the joint shape, which the backward pass then takes as
// the joint value's cotangent without assembling it. The bits are those of contiguous copies.
TEST_CASE("swiglu on the halves of one tensor: in place, cotangents side by side") {
  Generator gen(48);
  for (DType dt : kDtypes) {
    for (int64_t width : {300, 301, 512}) {
      // 300 and 301: rows of a ragged last tile, 301 also on no aligned address.
      CAPTURE(dt);
      CAPTURE(width);
      const Tensor joint = normal({2, 7, 2 * width}, gen, dt, 4.0), dy = normal({2, 7, width}, gen, dt);
      const Tensor g = slice(joint, -1, 0, width), u = slice(joint, -1, width, 2 * width);
      const Tensor gc = contiguous(g), uc = contiguous(u);
      Backend& cpu = backend(Device::cpu());
      CHECK(same_bits(cpu.swiglu_forward(g, u), cpu.swiglu_forward(gc, uc)));
      const SwigluGrads halves = cpu.swiglu_backward(dy, g, u), apart = cpu.swiglu_backward(dy, gc, uc);
      CHECK(same_bits(halves.dg, apart.dg));
      CHECK(same_bits(halves.du, apart.du));
      CHECK(halves.dg.same_storage(halves.du));
      CHECK(halves.du.offset() - halves.dg.offset() == width);
      CHECK(halves.dg.strides() == Strides{7 * 2 * width, 2 * width, 1});
      CHECK(!apart.dg.same_storage(apart.du));

      // Through autograd: the joint value's cotangent is the two halves' side by side.
      auto halves_of = [width](X x) { return swiglu(slice(x[0], -1, 0, width), slice(x[0], -1, width, 2 * width)); };
      const Tensor joint_grad = vjp(halves_of, {joint}, dy).second[0];
      const Tensor expected = concat({apart.dg, apart.du}, -1);
      CHECK(same_bits(joint_grad, expected));
    }
  }
}

TEST_CASE("rope matches Rope::apply's composition: forward and the gradient of x") {
  uint64_t seed = 70;
  for (int64_t d : {2, 8, 34})
    for (DType dt : kDtypes) {
      Generator gen(++seed);
      const int64_t t = 7;
      auto [cos, sin] = Rope{d, 10000.0, {}}.tables(t, dt, Device::cpu());
      const std::string what = cat(dt, " d=", d);
      const Tensor x = normal({2, 3, t, d}, gen, dt);
      expect_matches(rope_of(cos, sin, true), rope_of(cos, sin, false), {x}, seed, what + " contiguous");
      // As the attention layer passes q: [B, T, H, d] viewed as [B, H, T, d].
      const Tensor heads_last = permute(contiguous(permute(x, {0, 2, 1, 3})), {0, 2, 1, 3});
      expect_matches(rope_of(cos, sin, true), rope_of(cos, sin, false), {heads_last}, seed, what + " strided");
      // x broadcast against per-batch tables [2, 1, T, d]: the output grows, dx sums over it.
      const Tensor cos2 = stack({cos, slice(cos, 0, 0, t)}), sin2 = stack({sin, neg(sin)});
      expect_matches(rope_of(unsqueeze(cos2, 1), unsqueeze(sin2, 1), true),
                     rope_of(unsqueeze(cos2, 1), unsqueeze(sin2, 1), false), {normal({3, t, d}, gen, dt)}, seed,
                     what + " broadcast");
      // Tables with a non-unit last stride (read through a copy).
      const Tensor cos_t = strided_copy(cos), sin_t = strided_copy(sin);
      expect_matches(rope_of(cos_t, sin_t, true), rope_of(cos_t, sin_t, false), {x}, seed, what + " strided tables");
    }
  // Rows in more parallel chunks than one, cut inside the runs along T (301 positions): the
  // kernel walks each run of rows with constant steps and must pick up mid-run.
  for (DType dt : kDtypes) {
    Generator gen(++seed);
    const int64_t d = 34, t = 301;
    auto [cos, sin] = Rope{d, 10000.0, {}}.tables(t, dt, Device::cpu());
    const Tensor x = normal({3, 5, t, d}, gen, dt);
    const Tensor heads_last = permute(contiguous(permute(x, {0, 2, 1, 3})), {0, 2, 1, 3});
    expect_matches(rope_of(cos, sin, true), rope_of(cos, sin, false), {heads_last}, seed, cat(dt, " long, strided"));
  }
}

TEST_CASE("the fused ops pass gradcheck in f64") {
  Generator gen(99);
  const Tensor x = randn({3, 2, 9}, gen, DType::f64), weight = 1.0 + randn({9}, gen, DType::f64) * 0.3;
  GradcheckResult r = gradcheck(rms_fused, {x, weight});
  INFO("rms_norm: ", r.describe());
  CHECK(r.pass);

  r = gradcheck(swiglu_fused, {randn({3, 1, 5}, gen, DType::f64) * 3.0, randn({4, 5}, gen, DType::f64)});
  INFO("swiglu: ", r.describe());
  CHECK(r.pass);

  auto [cos, sin] = Rope{6, 10000.0, {}}.tables(5, DType::f64, Device::cpu());
  r = gradcheck(rope_of(cos, sin, true), {randn({2, 3, 5, 6}, gen, DType::f64)});
  INFO("rope: ", r.describe());
  CHECK(r.pass);
}

// joint_linear against one product per weight: the outputs and the weight and bias gradients
// are the same sums, so the same bits; the gradient of x is one sum over all the outputs, so
// close. In f64 and f32, with and without biases, x a batch; then gradcheck in f64.
TEST_CASE("joint_linear: one stacked product, the bits of separate ones") {
  Generator gen(2024);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tensor x = normal({2, 5, 24}, gen, dt);
    const std::vector<Tensor> weights{normal({16, 24}, gen, dt), normal({8, 24}, gen, dt), normal({3, 24}, gen, dt)};
    const std::vector<Tensor> biases{normal({16}, gen, dt), Tensor(), normal({3}, gen, dt)};
    std::vector<Tensor> cotangents;
    for (const Tensor& w : weights) cotangents.push_back(normal({2, 5, w.size(0)}, gen, dt));
    // sum_i <y_i, c_i>: each output weighed by its own random cotangent.
    auto loss = [&](bool joint) {
      return [&, joint](X in) {
        const std::vector<Tensor> w(in.begin() + 1, in.begin() + 4);
        const std::vector<Tensor> b{in[4], Tensor(), in[5]};
        std::vector<Tensor> y;
        if (joint) {
          y = joint_linear(in[0], w, b);
        } else {
          for (size_t i = 0; i < w.size(); ++i) {
            Tensor yi = matmul(in[0], transpose(w[i]));
            y.push_back(b[i].defined() ? yi + b[i] : yi);
          }
        }
        Tensor total = sum(y[0] * cotangents[0]);
        for (size_t i = 1; i < y.size(); ++i) total = total + sum(y[i] * cotangents[i]);
        return total;
      };
    };
    const std::vector<Tensor> inputs{x, weights[0], weights[1], weights[2], biases[0], biases[2]};
    {
      NoGrad no_grad;
      const std::vector<Tensor> joint = joint_linear(x, weights, biases);
      REQUIRE(joint.size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        Tensor separate = matmul(x, transpose(weights[i]));
        if (biases[i].defined()) separate = separate + biases[i];
        CHECK(same_bits(joint[i], separate));
      }
    }
    auto [joint_value, joint_grads] = value_and_grad(loss(true), inputs);
    auto [separate_value, separate_grads] = value_and_grad(loss(false), inputs);
    CHECK(rel_diff(joint_grads[0], separate_grads[0]) < tolerance(dt));
    for (size_t i = 1; i < inputs.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(joint_grads[i], separate_grads[i]));
    }
  }
  const Tensor x = randn({3, 4}, gen, DType::f64);
  GradcheckResult r = gradcheck(
      [](X in) {
        const std::vector<Tensor> y = joint_linear(in[0], {in[1], in[2]}, {in[3], Tensor()});
        return sum(y[0] * y[0]) + sum(tanh(y[1]));
      },
      {x, randn({5, 4}, gen, DType::f64), randn({2, 4}, gen, DType::f64), randn({5}, gen, DType::f64)});
  INFO("joint_linear: ", r.describe());
  CHECK(r.pass);
  CHECK_THROWS_WITH_AS(joint_linear(x, {x}, {}), doctest::Contains("joint_linear"), Error);
}

TEST_CASE("bad input names the op and the shapes") {
  Generator gen(5);
  const Tensor x = randn({2, 4}, gen);
  CHECK_THROWS_WITH_AS(rms_norm(x, randn({5}, gen), 1e-6), "[rms_norm] x [2, 4] and weight [5] do not match (weight must be [D], D the last axis of x, D > 0)", Error);
  CHECK_THROWS_WITH_AS(rms_norm(x, randn({4}, gen, DType::f64), 1e-6), doctest::Contains("[rms_norm] dtypes of x [2, 4] (f32) and weight [4] (f64)"), Error);
  CHECK_THROWS_WITH_AS(rms_norm(x, randn({4}, gen), -1.0), doctest::Contains("[rms_norm] eps"), Error);
  CHECK_THROWS_WITH_AS(rms_norm(randint({2, 4}, 0, 3, gen), randn({4}, gen), 1e-6),
                       doctest::Contains("[rms_norm] x must be floating, got i64 [2, 4]"), Error);

  CHECK_THROWS_WITH_AS(swiglu(randn({2, 3}, gen), randn({4}, gen)), "[swiglu] shapes [2, 3] and [4] cannot be broadcast",
                       Error);
  CHECK_THROWS_WITH_AS(swiglu(randn({2, 3}, gen), randn({2, 3}, gen, DType::bf16)),
                       doctest::Contains("[swiglu] dtypes of g [2, 3] (f32) and u [2, 3] (bf16) do not match"), Error);

  auto [cos, sin] = Rope{8, 10000.0, {}}.tables(3, DType::f32, Device::cpu());
  CHECK_THROWS_WITH_AS(rope(randn({2, 3, 6}, gen), cos, sin),
                       "[rope] x [2, 3, 6] and tables [3, 8] do not match (the last axes must be equal)", Error);
  CHECK_THROWS_WITH_AS(rope(randn({2, 3, 8}, gen), cos, slice(sin, 0, 0, 2)),
                       "[rope] cos [3, 8] and sin [2, 8] do not match", Error);
  CHECK_THROWS_WITH_AS(rope(randn({2, 4, 8}, gen), cos, sin), doctest::Contains("[rope] shapes [2, 4, 8] and [3, 8]"),
                       Error);
  CHECK_THROWS_WITH_AS(rope(randn({3, 7}, gen), randn({3, 7}, gen), randn({3, 7}, gen)),
                       "[rope] x [3, 7] needs an even last axis to rotate halves", Error);
  CHECK_THROWS_WITH_AS(rope(randn({3, 8}, gen, DType::f64), cos, sin), doctest::Contains("[rope] dtypes of x [3, 8] (f64)"),
                       Error);
  // Tracked tables would silently get no gradient: refused.
  auto differentiate_tables = [&](X t) { return sum(rope(randn({3, 8}, gen), t[0], sin)); };
  CHECK_THROWS_WITH_AS(value_and_grad(differentiate_tables, {cos}), doctest::Contains("[rope] cos and sin are constants"),
                       Error);
}

TEST_CASE("rms_norm: the same bits with 1 and 2 threads (weight gradient summed in fixed blocks)") {
  // 4096 rows: 256 blocks of partial weight sums, more than one chunk of rows for the forward.
  Generator gen(21);
  for (DType dt : {DType::f32, DType::bf16}) {
    INFO(dt);
    const Tensor x = normal({4096, 96}, gen, dt), weight = normal({96}, gen, dt);
    const Tensor cotangent = normal({4096, 96}, gen, dt);
    auto run = [&](int threads) {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
      return vjp(rms_fused, {x, weight}, cotangent);
    };
    auto [y1, g1] = run(1);
    auto [y2, g2] = run(2);
    CHECK(same_bits(y1, y2));
    CHECK(same_bits(g1[0], g2[0]));
    CHECK(same_bits(g1[1], g2[1]));
    CHECK(std::isfinite(g1[1].to_vector<double>()[0]));
  }
}

TEST_CASE("the layers run the fused ops") {
  Generator gen(8);
  const Tensor x = randn({2, 5, 16}, gen), weight = randn({16}, gen);
  Params ps{{"norm.weight", weight}};
  CHECK(same_bits(RMSNorm{16, 1e-5}.apply(x, ParamView(ps).sub("norm")), rms_norm(x, weight, 1e-5)));

  auto [cos, sin] = Rope{8, 10000.0, {}}.tables(5, DType::f32, Device::cpu());
  const Tensor q = randn({2, 3, 5, 8}, gen);
  CHECK(same_bits(Rope::apply(q, cos, sin), rope(q, cos, sin)));

  Params mlp{{"mlp.gate_proj.weight", randn({24, 16}, gen)},
             {"mlp.up_proj.weight", randn({24, 16}, gen)},
             {"mlp.down_proj.weight", randn({16, 24}, gen)}};
  const ParamView view = ParamView(mlp).sub("mlp");
  const Tensor g = matmul(x, transpose(mlp.at("mlp.gate_proj.weight")));
  const Tensor u = matmul(x, transpose(mlp.at("mlp.up_proj.weight")));
  const Tensor expected = matmul(swiglu(g, u), transpose(mlp.at("mlp.down_proj.weight")));
  CHECK(same_bits(SwiGLU{16, 24}.apply(x, view), expected));
}

// SwiGLU runs gate and up as one product: its gradients against the two separate products of
// the composed MLP, in f64 and f32, with and without biases.
TEST_CASE("SwiGLU: one gate/up product, the gradients of two") {
  Generator gen(9);
  for (DType dt : {DType::f64, DType::f32})
    for (bool bias : {false, true}) {
      CAPTURE(dt);
      CAPTURE(bias);
      const int64_t dim = 16, hidden = 40;
      std::vector<Tensor> inputs{normal({2, 5, dim}, gen, dt), normal({hidden, dim}, gen, dt),
                                 normal({hidden, dim}, gen, dt), normal({dim, hidden}, gen, dt)};
      if (bias)
        for (const Shape& shape : {Shape{hidden}, Shape{hidden}, Shape{dim}}) inputs.push_back(normal(shape, gen, dt));
      const Tensor cotangent = normal({2, 5, dim}, gen, dt);
      auto [y, grads] = vjp(
          [&](X in) {
            Params ps{{"gate_proj.weight", in[1]}, {"up_proj.weight", in[2]}, {"down_proj.weight", in[3]}};
            if (bias) {
              ps["gate_proj.bias"] = in[4];
              ps["up_proj.bias"] = in[5];
              ps["down_proj.bias"] = in[6];
            }
            return SwiGLU{dim, hidden, MlpActivation::silu, bias}.apply(in[0], ParamView(ps));
          },
          inputs, cotangent);
      auto [y_ref, grads_ref] = vjp(
          [&](X in) {
            auto linear = [&](const Tensor& x, size_t w, size_t b) {
              const Tensor out = matmul(x, transpose(in[w]));
              return bias ? out + in[b] : out;
            };
            return linear(silu(linear(in[0], 1, 4)) * linear(in[0], 2, 5), 3, 6);
          },
          inputs, cotangent);
      CHECK(rel_diff(y, y_ref) <= tolerance(dt));
      for (size_t i = 0; i < grads.size(); ++i) {
        CAPTURE(i);
        CHECK(rel_diff(grads[i], grads_ref[i]) <= tolerance(dt));
      }
    }
}
