// The tensor-core attention kernels (cuda/kernels/attention_mma.cuh: bf16, head dims 64 and 128)
// run by the SIMT emulator, against the composed oracle (nn::attention_composed in f32 on the
// same bf16 values, gradients from autograd) and against the SIMT kernels of attention.cuh:
// O, the saved S and L, and dq, dk, dv, dalpha (affine), dsigma (sink), for softmax, sink and
// affine (N visible and full), causal and not, GQA and MHA, T of one row, less than a tile and
// more than one tile, under two emulator schedules (which must agree bit for bit). The SIMT
// backward also runs on the tensor-core forward's saved tensors, which it must accept as its own.
#include "tests/cuda/kernel_check.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "cuda/kernels/launch.hpp"
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

// One line per configuration. T = 70 spans two 64-row tiles and a partial key step of the
// forward (64 keys) and of the backward (32); T = 17 is one partial tile; T = 130 three tiles.
const Case kCases[] = {
    {Kind::softmax, true, 1, 2, 1, 70, 64},   {Kind::softmax, false, 2, 2, 2, 17, 128},
    {Kind::softmax, true, 1, 2, 2, 1, 128},   {Kind::sink, true, 1, 2, 2, 70, 128},
    {Kind::sink, false, 1, 2, 1, 17, 64},     {Kind::sink, false, 1, 2, 1, 70, 64},
    {Kind::affine, true, 2, 2, 1, 70, 64},    {Kind::affine, false, 1, 2, 2, 70, 128},
    {Kind::affine, true, 1, 2, 1, 17, 128, AffineN::full},
    {Kind::affine, false, 1, 2, 2, 17, 64, AffineN::full},
    {Kind::affine, true, 1, 2, 2, 70, 64, AffineN::full},
    {Kind::softmax, true, 1, 4, 2, 130, 64},  {Kind::affine, false, 1, 2, 1, 130, 128},
};

// Random bf16 inputs of a case (no zeros: randn), and the same values in f32.
struct Cores {
  AttentionCore bf16, f32;
};

Cores make_cores(const Case& c, uint64_t seed) {
  const AttentionCore core = make_core(c, DType::bf16, seed);
  return {core, cast(core, DType::f32)};
}

// bf16 results: one rounding of the output, bf16 probabilities and ds in the products.
constexpr double kTolerance = 1e-2;

// dsigma_h = -sum_{b, i} exp(sigma_h - L_i) G_i . S_i cancels: its error scales with
// sum_{b, i} exp(sigma_h - L_i) |G_i| . |S_i| (from a forward's s and lse), not with the result.
// The largest |got - want| over that scale.
double dsigma_error(const Tensor& got, const Tensor& want, const AttentionCore& core, const Tensor& cotangent,
                    const AttentionForward& fwd) {
  const std::vector<double> g = values(got), w = values(want), sigma = values(core.sigma), lse = values(fwd.lse),
                            s = values(fwd.s), dy = values(cotangent);
  const int64_t batch = core.q.size(0), heads = core.q.size(1), t = core.q.size(2), d = core.q.size(3);
  double worst = 0;
  for (int64_t h = 0; h < heads; ++h) {
    double scale = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < t; ++i) {
        const int64_t row = (b * heads + h) * t + i;
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += std::abs(dy[size_t(row * d + x)] * s[size_t(row * d + x)]);
        scale += std::exp(sigma[size_t(h)] - lse[size_t(row)]) * dot;
      }
    worst = std::max(worst, std::abs(g[size_t(h)] - w[size_t(h)]) / scale);
  }
  return worst;
}

// Runs the SIMT kernels for every core while alive.
struct SimtKernelsOnly {
  SimtKernelsOnly() { emu::launch::set_attention_tensor_cores(false); }
  ~SimtKernelsOnly() { emu::launch::set_attention_tensor_cores(true); }
  SimtKernelsOnly(const SimtKernelsOnly&) = delete;
  SimtKernelsOnly& operator=(const SimtKernelsOnly&) = delete;
};

// O, dq, dk, dv and dalpha or dsigma.
std::vector<Tensor> results(const AttentionForward& fwd, const AttentionGrads& g) {
  std::vector<Tensor> out{fwd.o, g.dq, g.dk, g.dv};
  if (g.dalpha.defined()) out.push_back(g.dalpha);
  if (g.dsigma.defined()) out.push_back(g.dsigma);
  return out;
}

}  // namespace

TEST_CASE("tensor-core attention kernels match attention_composed and the SIMT kernels") {
  uint64_t seed = 1300;
  for (const Case& c : kCases) {
    INFO(c.str());
    const Cores cores = make_cores(c, ++seed);
    Generator gen(seed + 1000);
    const Tensor cotangent = cast(randn(cores.bf16.q.shape(), gen, DType::f64), DType::bf16);
    auto [want, want_grads] =
        vjp(as_function(cores.f32, attention_composed), differentiable_inputs(cores.f32), cast(cotangent, DType::f32));
    want_grads.insert(want_grads.begin(), want);

    AttentionForward simt_fwd;
    std::vector<Tensor> simt;
    {
      SimtKernelsOnly only;
      simt_fwd = emulated_forward(cores.bf16);
      simt = results(simt_fwd, emulated_backward(cores.bf16, simt_fwd, cotangent));
    }
    REQUIRE(simt.size() == want_grads.size());

    std::vector<Tensor> first;  // the first schedule's results
    for_each_schedule([&] {
      const AttentionForward fwd = emulated_forward(cores.bf16);
      const std::vector<Tensor> got = results(fwd, emulated_backward(cores.bf16, fwd, cotangent));
      REQUIRE(got.size() == want_grads.size());
      CHECK(rel_diff(fwd.s, simt_fwd.s) <= kTolerance);
      CHECK(rel_diff(fwd.lse, simt_fwd.lse) <= 1e-4);
      const char* names[] = {"O", "dq", "dk", "dv", c.kind == Kind::affine ? "dalpha" : "dsigma"};
      for (size_t n = 0; n < got.size(); ++n) {
        INFO(std::string(names[n]));
        CHECK(got[n].dtype() == DType::bf16);
        if (n == 4 && c.kind == Kind::sink) {
          CHECK(dsigma_error(got[n], want_grads[n], cores.f32, cotangent, fwd) <= kTolerance);
          CHECK(dsigma_error(got[n], simt[n], cores.f32, cotangent, fwd) <= kTolerance);
        } else {
          CHECK(rel_diff(got[n], want_grads[n]) <= kTolerance);
          CHECK(rel_diff(got[n], simt[n]) <= kTolerance);
        }
        if (first.size() == got.size()) expect_same(got[n], first[n], "the same under every schedule");
      }
      if (first.empty()) first = got;

      // The SIMT backward on this forward's saved tensors.
      SimtKernelsOnly only;
      const std::vector<Tensor> mixed = results(fwd, emulated_backward(cores.bf16, fwd, cotangent));
      for (size_t n = 1; n < mixed.size(); ++n) {
        INFO("SIMT backward on the tensor-core forward: ", std::string(names[n]));
        if (n == 4 && c.kind == Kind::sink)
          CHECK(dsigma_error(mixed[n], want_grads[n], cores.f32, cotangent, fwd) <= kTolerance);
        else
          CHECK(rel_diff(mixed[n], want_grads[n]) <= kTolerance);
      }
    });
  }
}

TEST_CASE("tensor-core attention kernels read inputs at any element offset") {
  // q, k, v and the cotangent one element into their storage: rows no longer 16-byte aligned.
  auto shifted = [](const Tensor& x) {
    Tensor storage = Tensor::empty({x.numel() + 1}, x.dtype());
    Tensor view = storage.as_strided(x.shape(), x.strides(), 1);
    cpu().assign(view, x);
    return view;
  };
  const Case c{Kind::affine, true, 1, 2, 1, 40, 64};
  INFO(c.str());
  const AttentionCore aligned = make_cores(c, 77).bf16;
  AttentionCore offset = aligned;
  offset.q = shifted(aligned.q);
  offset.k = shifted(aligned.k);
  offset.v = shifted(aligned.v);
  Generator gen(78);
  const Tensor cotangent = cast(randn(aligned.q.shape(), gen, DType::f64), DType::bf16);
  const AttentionForward want_fwd = emulated_forward(aligned);
  const std::vector<Tensor> want = results(want_fwd, emulated_backward(aligned, want_fwd, cotangent));
  for_each_schedule([&] {
    const AttentionForward fwd = emulated_forward(offset);
    const std::vector<Tensor> got = results(fwd, emulated_backward(offset, fwd, shifted(cotangent)));
    REQUIRE(got.size() == want.size());
    for (size_t n = 0; n < got.size(); ++n) expect_same(got[n], want[n], cat("output ", n));
  });
}
