// The composed attention: every kind from primitive ops, materializing the T x T scores. Slow
// and memory-hungry on purpose: it is the oracle the fused kernels are tested against.
#include <cmath>
#include <limits>

#include "nn/attention.hpp"
#include "tensor/ops.hpp"

namespace cotan::nn {

namespace {

// [B, Hkv, T, d] -> [B, H, T, d], each kv head repeated H / Hkv times (HF repeat_kv).
Tensor repeat_kv(const Tensor& x, int64_t heads) {
  int64_t b = x.size(0), hkv = x.size(1), t = x.size(2), d = x.size(3);
  if (hkv == heads) return x;
  Tensor e = broadcast_to(unsqueeze(x, 2), {b, hkv, heads / hkv, t, d});
  return reshape(e, {b, heads, t, d});
}

// visible[i][j]: key j is visible to query i.
Tensor visibility(int64_t t, bool causal, Device device) {
  Tensor i = reshape(arange(0, t, 1, DType::i64, device), {t, 1});
  Tensor j = reshape(arange(0, t, 1, DType::i64, device), {1, t});
  return causal ? le(j, i) : broadcast_to(eq(j, j), {t, t});
}

}  // namespace

void check_attention_core(const AttentionCore& in, std::string_view op) {
  auto need = [&](const Tensor& x, const char* name, int64_t dims) {
    if (!x.defined()) fail(op, name, " is missing");
    if (x.dim() != dims) fail(op, name, " must have ", dims, " dims, got shape ", to_string(x.shape()));
    if (x.dtype() != in.q.dtype()) fail(op, name, " has dtype ", x.dtype(), ", q has ", in.q.dtype());
    if (x.device() != in.q.device()) fail(op, name, " is on ", to_string(x.device()), ", q on ", to_string(in.q.device()));
  };
  need(in.q, "q", 4);
  if (!is_floating(in.q.dtype())) fail(op, "q must be floating, got ", in.q.dtype());
  need(in.k, "k", 4);
  need(in.v, "v", 4);
  int64_t b = in.q.size(0), h = in.q.size(1), t = in.q.size(2), d = in.q.size(3);
  if (in.k.shape() != in.v.shape())
    fail(op, "k ", to_string(in.k.shape()), " and v ", to_string(in.v.shape()), " differ");
  int64_t hkv = in.k.size(1);
  if (in.k.size(0) != b || in.k.size(2) != t || in.k.size(3) != d || hkv == 0 || h % hkv != 0)
    fail(op, "q ", to_string(in.q.shape()), " and k ", to_string(in.k.shape()),
         " do not match (want [B, Hkv, T, d] with H a multiple of Hkv)");
  if (in.alpha.defined() != in.alpha_ma.defined()) fail(op, "alpha and alpha_ma come together");
  if (in.alpha.defined()) {
    need(in.alpha, "alpha", 3);
    need(in.alpha_ma, "alpha_ma", 1);
    if (in.alpha.shape() != Shape{b, h, t})
      fail(op, "alpha has shape ", to_string(in.alpha.shape()), ", expected ", to_string(Shape{b, h, t}));
    if (in.alpha_ma.size(0) != h) fail(op, "alpha_ma has shape ", to_string(in.alpha_ma.shape()), ", expected [", h, "]");
  }
  if (in.sigma.defined()) {
    need(in.sigma, "sigma", 1);
    if (in.sigma.size(0) != h) fail(op, "sigma has shape ", to_string(in.sigma.shape()), ", expected [", h, "]");
    if (in.alpha.defined()) fail(op, "sink and affine cannot be combined");
  }
}

Tensor attention_composed(const AttentionCore& in) {
  check_attention_core(in, "attention");
  int64_t b = in.q.size(0), h = in.q.size(1), t = in.q.size(2), d = in.q.size(3);
  Device dev = in.q.device();
  DType dt = in.q.dtype();
  Tensor k = repeat_kv(in.k, h), v = repeat_kv(in.v, h);

  Tensor s = matmul(in.q, transpose(k)) * (1.0 / std::sqrt(double(d)));  // [B, H, T, T]
  Tensor visible = visibility(t, in.causal, dev);
  Tensor masked = where(visible, s, full({}, -std::numeric_limits<double>::infinity(), dt, dev));

  Tensor p;
  if (in.sigma.defined()) {
    // L_i = log(sum_j exp(s_ij) + exp(sigma_h)): the sink is one more logit in the denominator.
    Tensor sink = broadcast_to(reshape(in.sigma, {1, h, 1, 1}), {b, h, t, 1});
    Tensor lse = logsumexp(concat({masked, sink}, -1), {-1}, true);
    p = exp(masked - lse);
  } else {
    p = softmax(masked, -1);
  }
  Tensor o = matmul(p, v);  // S
  if (!in.alpha.defined()) return o;

  // beta_i = (alpha_ma - alpha_i) / N_i;  O_i = alpha_i S_i + beta_i U_i.
  Tensor n = in.causal && in.affine_n == AffineN::visible
                 ? reshape(cast(arange(1, t + 1, 1, DType::i64, dev), dt), {1, 1, t})
                 : full({}, double(t), dt, dev);
  Tensor beta = (reshape(in.alpha_ma.detach(), {1, h, 1}) - in.alpha) / n;  // [B, H, T]
  Tensor u = in.causal ? cumsum(v, 2) : broadcast_to(sum(v, {2}, true), v.shape());
  return unsqueeze(in.alpha, -1) * o + unsqueeze(beta, -1) * u;
}

}  // namespace cotan::nn
