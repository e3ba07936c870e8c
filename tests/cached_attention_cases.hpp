// Inputs for the tests of the cached attention (nn::cached_attention, CachedAttentionSpec in
// tensor/fused_ops.hpp), shared by the CPU tests (tests/nn/test_cached_attention.cpp) and the
// kernel tests (tests/cuda/test_kernels_cached_attention.cpp): a random spec of every kind, and a
// scalar reference written from the definition, in long double loops over plain vectors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensor/fused_ops.hpp"
#include "tensor/ops.hpp"

namespace cached_attention_cases {

using namespace cotan;

struct Case {
  CoreKind kind;
  int64_t b, h, hkv, tq, s, d;
  bool ragged = false;  // rows whose early slots are padding (a ragged prefill's layout)
  std::string str() const {
    return std::string(kind == CoreKind::softmax ? "softmax" : kind == CoreKind::sink ? "sink" : "affine") +
           " B" + std::to_string(b) + " H" + std::to_string(h) + "/" + std::to_string(hkv) + " Tq" +
           std::to_string(tq) + " S" + std::to_string(s) + " d" + std::to_string(d) + (ragged ? " ragged" : "");
  }
};

inline const Case kCases[] = {
    {CoreKind::softmax, 2, 4, 2, 1, 9, 16},        {CoreKind::sink, 2, 4, 2, 1, 9, 16},
    {CoreKind::affine, 2, 4, 2, 1, 9, 16},         {CoreKind::softmax, 3, 4, 1, 3, 11, 8, true},
    {CoreKind::sink, 3, 2, 2, 4, 7, 12, true},     {CoreKind::affine, 3, 4, 2, 3, 11, 8, true},
    {CoreKind::affine, 1, 2, 2, 5, 5, 13},         {CoreKind::softmax, 1, 2, 1, 2, 300, 64},
    {CoreKind::affine, 1, 4, 2, 2, 270, 32, true},
};

// Row b's slot j holds a token: ragged rows lose a few slots in their prompt region (never the
// first slot, nor the Tq new ones).
inline bool holds(const Case& c, int64_t b, int64_t j) {
  if (!c.ragged || j == 0 || j >= c.s - c.tq) return true;
  return (j + b) % 3 != 1;
}

// Query i of row b sees slot j.
inline bool sees(const Case& c, int64_t b, int64_t i, int64_t j) { return holds(c, b, j) && j <= c.s - c.tq + i; }

// A random spec of the case in dtype (values drawn in f64, then converted), with u and count
// computed from v and the visibility, as the cache keeps them.
inline CachedAttentionSpec make_spec(const Case& c, DType dtype, uint64_t seed) {
  Generator gen(seed);
  CachedAttentionSpec spec;
  spec.kind = c.kind;
  spec.q = cast(randn({c.b, c.h, c.tq, c.d}, gen, DType::f64), dtype);
  spec.k = cast(randn({c.b, c.hkv, c.s, c.d}, gen, DType::f64), dtype);
  spec.v = cast(randn({c.b, c.hkv, c.s, c.d}, gen, DType::f64), dtype);
  std::vector<double> mask;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t j = 0; j < c.s; ++j) mask.push_back(holds(c, b, j) ? 1 : 0);
  spec.visible = gt(from_vector(mask, {c.b, c.s}), full({}, 0.5, DType::f64));
  if (c.kind == CoreKind::sink) spec.sigma = cast(randn({c.h}, gen, DType::f64), dtype);
  if (c.kind == CoreKind::affine) {
    spec.alpha = cast(rand({c.b, c.h, c.tq}, gen, DType::f64) * 1.5, dtype);
    spec.alpha_ma = cast(rand({c.h}, gen, DType::f64), dtype);
    const std::vector<double> v = cast(spec.v, DType::f64).to_vector<double>();
    std::vector<double> u;
    std::vector<int64_t> count;
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t g = 0; g < c.hkv; ++g)
        for (int64_t i = 0; i < c.tq; ++i)
          for (int64_t x = 0; x < c.d; ++x) {
            double sum = 0;
            for (int64_t j = 0; j < c.s; ++j)
              if (sees(c, b, i, j)) sum += v[size_t(((b * c.hkv + g) * c.s + j) * c.d + x)];
            u.push_back(sum);
          }
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t i = 0; i < c.tq; ++i) {
        int64_t n = 0;
        for (int64_t j = 0; j < c.s; ++j) n += sees(c, b, i, j);
        count.push_back(n);
      }
    spec.u = cast(from_vector(u, {c.b, c.hkv, c.tq, c.d}), dtype);
    spec.count = from_vector(count, {c.b, c.tq});
  }
  return spec;
}

// O [B, H, Tq, d] from the definition, in long double, from the spec's values.
inline std::vector<double> reference(const Case& c, const CachedAttentionSpec& spec) {
  auto get = [](const Tensor& t) { return cast(t, DType::f64).to_vector<double>(); };
  const std::vector<double> q = get(spec.q), k = get(spec.k), v = get(spec.v);
  const std::vector<double> sigma = spec.sigma.defined() ? get(spec.sigma) : std::vector<double>();
  const std::vector<double> alpha = spec.alpha.defined() ? get(spec.alpha) : std::vector<double>();
  const std::vector<double> alpha_ma = spec.alpha_ma.defined() ? get(spec.alpha_ma) : std::vector<double>();
  std::vector<double> out;
  const long double scale = 1.0L / std::sqrt(static_cast<long double>(c.d));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        const int64_t g = h / (c.h / c.hkv);
        std::vector<long double> w(static_cast<size_t>(c.s), 0.0L);
        long double top = -std::numeric_limits<long double>::infinity(), total = 0;
        for (int64_t j = 0; j < c.s; ++j) {
          if (!sees(c, b, i, j)) continue;
          long double dot = 0;
          for (int64_t x = 0; x < c.d; ++x)
            dot += (long double)q[size_t(((b * c.h + h) * c.tq + i) * c.d + x)] *
                   k[size_t(((b * c.hkv + g) * c.s + j) * c.d + x)];
          w[size_t(j)] = scale * dot;
          top = std::max(top, w[size_t(j)]);
        }
        for (int64_t j = 0; j < c.s; ++j)
          if (sees(c, b, i, j)) total += (w[size_t(j)] = std::exp(w[size_t(j)] - top));
        if (c.kind == CoreKind::sink) total += std::exp((long double)sigma[size_t(h)] - top);
        long double a = 1, beta = 0;
        int64_t n = 0;
        for (int64_t j = 0; j < c.s; ++j) n += sees(c, b, i, j);
        if (c.kind == CoreKind::affine) {
          a = alpha[size_t((b * c.h + h) * c.tq + i)];
          beta = ((long double)alpha_ma[size_t(h)] - a) / n;
        }
        for (int64_t x = 0; x < c.d; ++x) {
          long double s = 0, u = 0;
          for (int64_t j = 0; j < c.s; ++j) {
            if (!sees(c, b, i, j)) continue;
            const long double vj = v[size_t(((b * c.hkv + g) * c.s + j) * c.d + x)];
            s += w[size_t(j)] / total * vj;
            u += vj;
          }
          out.push_back(double(c.kind == CoreKind::affine ? a * s + beta * u : s));
        }
      }
  return out;
}

// The largest |got - want| over max(1, |want|).
inline double max_rel_error(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = cast(got, DType::f64).to_vector<double>();
  double worst = g.size() == want.size() ? 0 : std::numeric_limits<double>::infinity();
  for (size_t n = 0; n < std::min(g.size(), want.size()); ++n)
    worst = std::max(worst, std::abs(g[n] - want[n]) / std::max(1.0, std::abs(want[n])));
  return worst;
}

}  // namespace cached_attention_cases
