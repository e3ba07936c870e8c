// Results are the same bits whatever the number of CPU threads (the kernels cut work into chunks
// that depend only on the problem size and combine partials in chunk order), and the same seed
// draws the same random tensors.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "autograd/autograd.hpp"
#include "tensor/ops.hpp"

using namespace cotan;

namespace {

struct Named {
  std::string name;
  Tensor value;
};

// The raw bytes of a tensor in row-major order.
std::vector<char> bytes_of(const Tensor& t) {
  Tensor c = contiguous(t.detach());
  std::vector<char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  std::vector<char> x = bytes_of(a), y = bytes_of(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size()) == 0;
}

// A two-layer MLP with a cross-entropy-like loss, forward and backward, plus reductions over a
// 4M-element tensor: every result that a reduction order could change.
std::vector<Named> reduction_heavy(uint64_t seed) {
  Generator gen(seed);
  const int64_t batch = 128, d_in = 1024, d_hidden = 1024, vocab = 2048;
  Tensor x = randn({batch, d_in}, gen);
  Tensor w1 = randn({d_in, d_hidden}, gen) * (1.0 / 32);      // 1M elements
  Tensor b1 = randn({d_hidden}, gen) * 0.1;
  Tensor w2 = randn({d_hidden, vocab}, gen) * (1.0 / 32);     // 2M elements
  Tensor labels = randint({batch}, 0, vocab, gen);
  Tensor big = randn({2048, 2048}, gen);                      // 4M elements

  auto loss = [&](const std::vector<Tensor>& p) {
    Tensor h = silu(matmul(x, p[0]) + p[1]);
    Tensor logits = matmul(h, p[2]);                          // [batch, vocab]
    Tensor picked = squeeze(gather(log_softmax(logits), 1, unsqueeze(labels, 1)), 1);
    Tensor entropy_like = sum(softmax(logits) * logits, {-1});
    return mean(logsumexp(logits) - picked) - 0.1 * mean(entropy_like + picked) + 1e-4 * sum(square(p[0])) +
           mean(var(h, {0}));
  };
  auto [value, grads] = value_and_grad(loss, {w1, b1, w2});

  std::vector<Named> out;
  out.push_back({"loss", value});
  out.push_back({"grad w1", grads[0]});
  out.push_back({"grad b1", grads[1]});
  out.push_back({"grad w2", grads[2]});
  out.push_back({"sum", sum(big)});
  out.push_back({"mean axis 0", mean(big, {0})});
  out.push_back({"sum axis 1", sum(big, {1})});
  out.push_back({"var", var(big)});
  out.push_back({"max", max(big)});
  out.push_back({"logsumexp axis 0", logsumexp(big, {0})});
  out.push_back({"logsumexp", logsumexp(big)});
  out.push_back({"softmax axis 0", softmax(big, 0)});
  out.push_back({"cumsum axis 0", cumsum(big, 0)});
  out.push_back({"f64 sum", sum(cast(big, DType::f64))});
  out.push_back({"bf16 sum", sum(cast(big, DType::bf16))});
  out.push_back({"gram", matmul(transpose(big), big)});
  // A GEMM with several K chunks (K = 2100, chunks of at most 1024) and ragged edges (517 rows
  // and 389 columns are multiples of no micro-tile), B read in place and B packed.
  Tensor ga = randn({517, 2100}, gen), gb = randn({2100, 389}, gen), gc = randn({389, 2100}, gen);
  out.push_back({"ragged gemm", matmul(ga, gb)});
  out.push_back({"ragged gemm, B transposed", matmul(ga, transpose(gc))});
  // Narrow (at most 320 columns): A's rows read in place with AVX2, the short last panel packed.
  Tensor gd = randn({2100, 250}, gen);
  out.push_back({"ragged narrow gemm", matmul(ga, gd)});
  return out;
}

std::vector<Named> with_threads(int n, uint64_t seed) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(n));
  return reduction_heavy(seed);
}

}  // namespace

TEST_CASE("1 and 2 threads give the same bits") {
  INFO("cores available: ", tbb::this_task_arena::max_concurrency());
  std::vector<Named> one = with_threads(1, 2024);
  std::vector<Named> two = with_threads(2, 2024);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO(one[i].name);
    CHECK(same_bits(one[i].value, two[i].value));
  }
  // The loss is a finite number: the comparison above is not between two NaNs.
  float loss = one[0].value.item<float>();
  CHECK(loss == loss);
}

TEST_CASE("the same run twice gives the same bits") {
  std::vector<Named> a = with_threads(2, 7);
  std::vector<Named> b = with_threads(2, 7);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(same_bits(a[i].value, b[i].value));
  }
}

TEST_CASE("the same seed draws the same random tensors") {
  auto draw = [](uint64_t seed) {
    Generator gen(seed);
    std::vector<Tensor> out;
    out.push_back(randn({1000, 1000}, gen));
    out.push_back(rand({333, 777}, gen, DType::f64));
    out.push_back(randn({4097}, gen, DType::bf16));
    out.push_back(randint({100, 100}, -5, 17, gen));
    out.push_back(bernoulli({100, 101}, 0.3, gen));
    out.push_back(dropout(ones({64, 64}), 0.5, gen));
    return std::pair{out, gen};
  };
  auto [a, gen_a] = draw(99);
  auto [b, gen_b] = draw(99);
  CHECK(gen_a == gen_b);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));

  auto [c, gen_c] = draw(100);
  for (size_t i = 0; i < a.size(); ++i) CHECK_FALSE(same_bits(a[i], c[i]));

  // Counter-based: the thread count does not change a draw.
  std::vector<Tensor> single;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    single = draw(99).first;
  }
  for (size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], single[i]));
}

TEST_CASE("a generator at an offset continues the same stream") {
  Generator whole(5);
  Tensor first = randn({1024}, whole);
  uint64_t middle = whole.offset();
  Tensor second = randn({1024}, whole);
  Generator resumed(5, middle);
  Tensor again = randn({1024}, resumed);
  CHECK(same_bits(second, again));
  CHECK_FALSE(same_bits(first, second));
}
