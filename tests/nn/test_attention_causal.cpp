// Causality holds exactly in f64, for the composed and the fused attention of every core kind:
// a loss on the first positions' outputs gives exactly zero gradient to the keys and values of
// later positions. The composed attention masks with -inf before its softmax; a vector exp that
// turns exp(-inf) into a subnormal instead of 0 (Eigen's packet exp does on SSE and AVX2) leaked
// about 1e-307 into those gradients.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/autograd.hpp"
#include "tests/attention_cases.hpp"

using namespace cotan;
using namespace attention_cases;

TEST_CASE("attention is exactly causal in f64: no gradient reaches later keys and values") {
  for (Kind kind : {Kind::softmax, Kind::sink, Kind::affine})
    for (Attention attention : {Attention(nn::attention_composed), Attention(nn::attention_fused)}) {
      Case c;
      c.kind = kind;
      c.t = 19;  // more than a full f64 vector of keys, and a tail
      c.d = 8;
      const AttentionCore core = make_core(c, DType::f64, 41 + uint64_t(kind));
      const int64_t first = 5;  // the loss reads the outputs of positions 0 .. first-1
      Generator gen(7);
      const Tensor weights = randn({c.batch, c.heads, first, c.d}, gen, DType::f64);
      const Function f = as_function(core, attention);
      auto [value, grads] = value_and_grad(
          [&](const std::vector<Tensor>& xs) { return sum(slice(f(xs), 2, 0, first) * weights); },
          nn::differentiable_inputs(core));
      const std::string what = std::string(kind_name(kind)) +
                               (attention == Attention(nn::attention_composed) ? " composed" : " fused");
      // grads: dq, dk, dv (then dalpha or dsigma). Positions >= first of dk and dv: exactly 0.
      for (size_t input : {size_t(1), size_t(2)}) {
        const std::vector<double> later = contiguous(slice(grads[input], 2, first, c.t)).to_vector<double>();
        int64_t nonzero = 0;
        double largest = 0;
        for (double g : later)
          if (g != 0) ++nonzero, largest = std::max(largest, std::abs(g));
        CHECK_MESSAGE(nonzero == 0, what, input == 1 ? " dk" : " dv", ": ", nonzero, " nonzero, up to ", largest);
        // ... while the earlier positions do get gradient (the test can see a gradient at all).
        const std::vector<double> earlier = contiguous(slice(grads[input], 2, 0, first)).to_vector<double>();
        double sum_abs = 0;
        for (double g : earlier) sum_abs += std::abs(g);
        CHECK_MESSAGE(sum_abs > 1e-3, what);
      }
    }
}
