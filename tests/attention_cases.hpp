// Attention configurations shared by the tests of the fused CPU attention (tests/nn) and of the
// kernels (tests/cuda): a case, its random core, the core as a function of its differentiable
// inputs, and a normwise comparison.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/attention.hpp"
#include "tensor/ops.hpp"

namespace attention_cases {

using cotan::DType;
using cotan::Tensor;
using cotan::nn::AffineN;
using cotan::nn::AttentionCore;

enum class Kind { softmax, sink, affine };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::softmax: return "softmax";
    case Kind::sink: return "sink";
    case Kind::affine: return "affine";
  }
  return "?";
}

struct Case {
  Kind kind = Kind::softmax;
  bool causal = true;
  int64_t batch = 1, heads = 4, kv_heads = 2, t = 7, d = 5;
  AffineN affine_n = AffineN::visible;

  std::string str() const {
    return cotan::cat(kind_name(kind), causal ? " causal" : " full", " B=", batch, " H=", heads, " Hkv=", kv_heads,
                      " T=", t, " d=", d, affine_n == AffineN::visible ? " N=visible" : " N=full");
  }
};

// Fresh random inputs, drawn in f64 and cast, so that every dtype sees the same values: q, k, v
// standard normal, alpha in (0, 1) and alpha_ma in [0, 1) (affine), sigma standard normal (sink).
inline AttentionCore make_core(const Case& c, DType dt, uint64_t seed) {
  cotan::Generator gen(seed);
  auto draw = [&](const cotan::Shape& shape) { return cast(randn(shape, gen, DType::f64), dt); };
  AttentionCore core;
  core.causal = c.causal;
  core.affine_n = c.affine_n;
  core.q = draw({c.batch, c.heads, c.t, c.d});
  core.k = draw({c.batch, c.kv_heads, c.t, c.d});
  core.v = draw({c.batch, c.kv_heads, c.t, c.d});
  if (c.kind == Kind::affine) {
    core.alpha = cast(sigmoid(randn({c.batch, c.heads, c.t}, gen, DType::f64)), dt);
    core.alpha_ma = cast(rand({c.heads}, gen, DType::f64), dt);
  }
  if (c.kind == Kind::sink) core.sigma = draw({c.heads});
  return core;
}

using Attention = Tensor (*)(const AttentionCore&);

// attention(base with xs as its differentiable inputs): for vjp and gradcheck over
// cotan::nn::differentiable_inputs(base).
inline cotan::Function as_function(const AttentionCore& base, Attention attention) {
  return [base, attention](const std::vector<Tensor>& xs) {
    return attention(cotan::nn::with_differentiable_inputs(base, xs));
  };
}

// max |a - b| / max(max |b|, floor): normwise, so that entries near zero do not dominate; the
// floor covers references that vanish (dq and dk are exactly zero with a single key, T = 1,
// where both sides hold only rounding noise). Inputs and cotangents are O(1) in these tests.
inline double rel_diff(const Tensor& a, const Tensor& b, double floor = 1e-2) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / std::max(scale, floor);
}

}  // namespace attention_cases
