// The fused attention kernels (cuda/kernels/attention.cuh) run by the SIMT emulator, against the
// composed oracle (nn::attention_composed, its gradients from autograd) and the CPU's fused op
// (nn::attention_fused): O, and dq, dk, dv, dalpha (affine), dsigma (sink), for softmax, sink
// and affine (N visible and full), causal and not, GQA and MHA, T spanning several 16-row tiles
// and not a multiple of them, head dims 64, 128 and one off the lane width, under two emulator
// schedules (which must agree bit for bit).
#include "tests/cuda/kernel_check.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/attention.hpp"
#include "tensor/ops.hpp"
#include "tests/attention_cases.hpp"

using namespace cotan;
using namespace cotan::nn;
using namespace kernel_check;
using namespace attention_cases;

namespace {

// The emulated backend's attention kernels on a core.
AttentionForward emulated_forward(const AttentionCore& core) {
  return emulated_backend().attention_forward(core_spec(core));
}
AttentionGrads emulated_backward(const AttentionCore& core, const AttentionForward& fwd, const Tensor& d_out) {
  return emulated_backend().attention_backward(core_spec(core), fwd, d_out);
}

// One line per configuration.
const Case kCases[] = {
    {Kind::softmax, true, 2, 4, 2, 37, 64},  {Kind::softmax, false, 2, 4, 2, 37, 64},
    {Kind::softmax, true, 1, 2, 2, 37, 64},  {Kind::softmax, false, 1, 2, 2, 37, 64},
    {Kind::sink, true, 2, 4, 2, 37, 64},     {Kind::sink, false, 2, 4, 2, 37, 64},
    {Kind::sink, true, 1, 2, 2, 37, 64},     {Kind::sink, false, 1, 2, 2, 37, 64},
    {Kind::affine, true, 2, 4, 2, 37, 64},   {Kind::affine, false, 2, 4, 2, 37, 64},
    {Kind::affine, true, 1, 2, 2, 37, 64},   {Kind::affine, false, 1, 2, 2, 37, 64},
    {Kind::affine, true, 1, 4, 2, 37, 64, AffineN::full},
    {Kind::affine, false, 1, 4, 2, 37, 64, AffineN::full},
    {Kind::softmax, true, 1, 4, 2, 33, 128}, {Kind::affine, true, 1, 4, 2, 20, 128},
    {Kind::sink, true, 1, 4, 1, 16, 40},     {Kind::affine, false, 1, 2, 1, 5, 13},
};


constexpr double kTolerance = 1e-4;  // f32; the kernels sum in another order than the CPU

}  // namespace

TEST_CASE("attention kernels match attention_composed and attention_fused: forward and gradients") {
  uint64_t seed = 300;
  for (const Case& c : kCases) {
    INFO(c.str());
    const AttentionCore core = make_core(c, DType::f32, ++seed);
    Generator gen(seed + 1000);
    const Tensor cotangent = cast(randn(core.q.shape(), gen, DType::f64), DType::f32);
    auto [composed, composed_grads] =
        vjp(as_function(core, attention_composed), differentiable_inputs(core), cotangent);
    auto [fused, fused_grads] = vjp(as_function(core, attention_fused), differentiable_inputs(core), cotangent);

    std::vector<Tensor> first;  // the first schedule's results
    for_each_schedule([&] {
      const AttentionForward fwd = emulated_forward(core);
      const AttentionGrads g = emulated_backward(core, fwd, cotangent);
      std::vector<Tensor> got{fwd.o, g.dq, g.dk, g.dv};
      if (c.kind == Kind::affine) got.push_back(g.dalpha);
      if (c.kind == Kind::sink) got.push_back(g.dsigma);
      CHECK(g.dalpha.defined() == (c.kind == Kind::affine));
      CHECK(g.dsigma.defined() == (c.kind == Kind::sink));
      REQUIRE(got.size() == composed_grads.size() + 1);
      const char* names[] = {"O", "dq", "dk", "dv", c.kind == Kind::affine ? "dalpha" : "dsigma"};
      for (size_t n = 0; n < got.size(); ++n) {
        INFO(names[n]);
        CHECK(got[n].dtype() == DType::f32);
        const Tensor& want = n == 0 ? composed : composed_grads[n - 1];
        const Tensor& cpu_fused = n == 0 ? fused : fused_grads[n - 1];
        CHECK(rel_diff(got[n], want) <= kTolerance);
        CHECK(rel_diff(got[n], cpu_fused) <= kTolerance);
        if (first.size() == got.size()) expect_same(got[n], first[n], "the same under every schedule");
      }
      if (first.empty()) first = got;
    });
  }
}

TEST_CASE("attention kernels reject what they do not run") {
  Generator gen(7);
  AttentionCore core;
  core.q = randn({1, 2, 5, 130}, gen);
  core.k = randn({1, 2, 5, 130}, gen);
  core.v = randn({1, 2, 5, 130}, gen);
  CHECK_THROWS_WITH_AS(emulated_forward(core), doctest::Contains("head dim 130"), std::exception);
  core.q = randn({1, 2, 5, 8}, gen, DType::f64);
  core.k = randn({1, 2, 5, 8}, gen, DType::f64);
  core.v = randn({1, 2, 5, 8}, gen, DType::f64);
  CHECK_THROWS_WITH_AS(emulated_forward(core), doctest::Contains("f32 or bf16"), std::exception);
}

TEST_CASE("attention kernels in bf16: f32 compute against the f32 oracle on the same values") {
  const Case cases[] = {{Kind::affine, true, 1, 4, 2, 37, 64}, {Kind::sink, false, 1, 4, 2, 37, 64},
                        {Kind::softmax, true, 1, 2, 2, 21, 128}};
  uint64_t seed = 900;
  for (const Case& c : cases) {
    INFO(c.str());
    const AttentionCore wide = make_core(c, DType::f32, ++seed);
    const AttentionCore narrow = cast(wide, DType::bf16);
    const AttentionCore exact = cast(narrow, DType::f32);  // the bf16 values, in f32
    Generator gen(seed + 1000);
    const Tensor cotangent = cast(randn(wide.q.shape(), gen, DType::f64), DType::bf16);
    auto [want, want_grads] =
        vjp(as_function(exact, attention_composed), differentiable_inputs(exact), cast(cotangent, DType::f32));
    for_each_schedule([&] {
      const AttentionForward fwd = emulated_forward(narrow);
      const AttentionGrads g = emulated_backward(narrow, fwd, cotangent);
      std::vector<Tensor> got{fwd.o, g.dq, g.dk, g.dv};
      if (g.dalpha.defined()) got.push_back(g.dalpha);
      if (g.dsigma.defined()) got.push_back(g.dsigma);
      REQUIRE(got.size() == want_grads.size() + 1);
      for (size_t n = 0; n < got.size(); ++n) {
        INFO("output ", n);
        CHECK(got[n].dtype() == DType::bf16);
        CHECK(rel_diff(got[n], n == 0 ? want : want_grads[n - 1]) <= 2e-2);
      }
    });
  }
}
