// The engine: fan-out, broadcasting undone, no_grad, detach, checkpoint and errors. Gradients are
// compared with derivatives worked out by hand.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "autograd/autograd.hpp"
#include "tensor/ops.hpp"
#include "tensor/product_log.hpp"
#include "tensor/random.hpp"

using namespace cotan;

namespace {

void check_close(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(expected[i]).epsilon(tol));
}

}  // namespace

TEST_CASE("value_and_grad of a product with fan-out") {
  // f(x, y) = sum(x * y + x * x) -> df/dx = y + 2x, df/dy = x
  Tensor x = from_vector(std::vector<double>{1, -2, 3}, {3});
  Tensor y = from_vector(std::vector<double>{0.5, 4, -1}, {3});
  auto [value, grads] = value_and_grad([](const std::vector<Tensor>& in) {
    return sum(in[0] * in[1] + in[0] * in[0]);
  }, {x, y});
  CHECK(value.item<double>() == doctest::Approx(0.5 - 8 - 3 + 1 + 4 + 9));
  check_close(grads[0], {2.5, 0, 5});
  check_close(grads[1], {1, -2, 3});
  CHECK_FALSE(value.tracked());
}

TEST_CASE("value_and_grad_aux: the value, the gradients and the auxiliary result as f returned it") {
  // f(x, y) = sum(exp(x) * y) -> df/dx = exp(x) * y, df/dy = exp(x); aux = (x * 2, the count).
  struct Aux {  // no default constructor: aux is built by f alone
    Tensor doubled;
    int count;
    explicit Aux(Tensor d, int c) : doubled(std::move(d)), count(c) {}
  };
  Tensor x = from_vector(std::vector<double>{0.0, 1.0, -2.0}, {3});
  Tensor y = from_vector(std::vector<double>{3.0, -1.0, 0.5}, {3});
  auto [value, aux, grads] = value_and_grad_aux(
      [](const std::vector<Tensor>& in) {
        return std::pair{sum(exp(in[0]) * in[1]), Aux(in[0] * 2.0, int(in.size()))};
      },
      {x, y});
  static_assert(std::is_same_v<decltype(aux), Aux>);
  const double e1 = std::exp(1.0), em2 = std::exp(-2.0);
  CHECK(value.item<double>() == doctest::Approx(3.0 - e1 + 0.5 * em2).epsilon(1e-15));
  CHECK_FALSE(value.tracked());
  REQUIRE(grads.size() == 2);
  check_close(grads[0], {3.0, -e1, 0.5 * em2}, 1e-15);
  check_close(grads[1], {1.0, e1, em2}, 1e-15);
  CHECK(aux.count == 2);
  check_close(aux.doubled, {0.0, 2.0, -4.0});
  CHECK(aux.doubled.tracked());  // as computed: not detached

  // A tuple works as the pair does; f's errors are value_and_grad's.
  auto [v2, n, g2] = value_and_grad_aux(
      [](const std::vector<Tensor>& in) { return std::tuple{sum(in[0] * in[0]), std::string("aux")}; }, {y});
  CHECK(v2.item<double>() == doctest::Approx(9.0 + 1.0 + 0.25));
  CHECK(n == "aux");
  check_close(g2[0], {6.0, -2.0, 1.0});
  CHECK_THROWS_WITH_AS(value_and_grad_aux([](const std::vector<Tensor>& in) { return std::pair{in[0] * 2.0, 1}; }, {x}),
                       "[value_and_grad] f must return a single value, got shape [3]", Error);
}

TEST_CASE("broadcasting is undone in the pullback") {
  // f(a, b) = sum(a[2,3] * b[3]) -> df/db_j = sum_i a_ij
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<double>{1, 1, 1}, {3});
  auto [value, grads] = value_and_grad([](const std::vector<Tensor>& in) { return sum(in[0] * in[1]); }, {a, b});
  CHECK(grads[1].shape() == Shape{3});
  check_close(grads[1], {5, 7, 9});
  CHECK(grads[0].shape() == Shape{2, 3});
  check_close(grads[0], {1, 1, 1, 1, 1, 1});
}

TEST_CASE("a linear layer on a batch: x [B, T, K] @ w [K, N] and both gradients, against sums in long double") {
  // matmul folds the batch into the rows of one product; the weight's gradient is then one sum
  // over all B * T rows. Checked element by element against the definitions.
  Generator gen(11);
  const int64_t b = 3, t = 5, k = 37, n = 6;
  Tensor x = randn({b, t, k}, gen, DType::f64), w = randn({k, n}, gen, DType::f64);
  Tensor g = randn({b, t, n}, gen, DType::f64);
  auto [y, grads] = vjp([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {x, w}, g);
  REQUIRE(y.shape() == Shape{b, t, n});
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), gv = g.to_vector<double>();
  const auto yv = y.to_vector<double>(), dx = grads[0].to_vector<double>(), dw = grads[1].to_vector<double>();
  auto sum_of = [](int64_t len, auto term) {  // in long double
    long double sum = 0;
    for (int64_t i = 0; i < len; ++i) sum += (long double)term(i);
    return double(sum);
  };
  const int64_t rows = b * t;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      CHECK(yv[size_t(r * n + j)] ==
            doctest::Approx(sum_of(k, [&](int64_t p) { return (long double)xv[size_t(r * k + p)] * wv[size_t(p * n + j)]; }))
                .epsilon(1e-12));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < k; ++p)
      CHECK(dx[size_t(r * k + p)] ==
            doctest::Approx(sum_of(n, [&](int64_t j) { return (long double)gv[size_t(r * n + j)] * wv[size_t(p * n + j)]; }))
                .epsilon(1e-12));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j)
      CHECK(dw[size_t(p * n + j)] ==
            doctest::Approx(sum_of(rows, [&](int64_t r) { return (long double)xv[size_t(r * k + p)] * gv[size_t(r * n + j)]; }))
                .epsilon(1e-12));
  // Through a transposed view of the batch (folded through a copy), the same values.
  Tensor xt = contiguous(permute(x, {1, 0, 2}));  // [T, B, K]
  auto [y2, grads2] = vjp([](const std::vector<Tensor>& in) { return matmul(permute(in[0], {1, 0, 2}), in[1]); },
                          {xt, w}, g);
  CHECK(y2.to_vector<double>() == yv);
  const auto dw2 = grads2[1].to_vector<double>();
  for (size_t i = 0; i < dw.size(); ++i) CHECK(dw2[i] == doctest::Approx(dw[i]).epsilon(1e-12));
}

TEST_CASE("unused inputs get zero gradients and detach cuts the graph") {
  Tensor x = from_vector(std::vector<double>{2, 3}, {2});
  Tensor y = from_vector(std::vector<double>{7, 8}, {2});
  auto [value, grads] = value_and_grad([](const std::vector<Tensor>& in) {
    return sum(in[0] * in[0].detach());  // only the first factor carries gradient
  }, {x, y});
  check_close(grads[0], {2, 3});
  check_close(grads[1], {0, 0});
}

TEST_CASE("no_grad records nothing") {
  Tensor x = track(from_vector(std::vector<double>{1, 2}, {2}));
  Tensor y;
  {
    NoGrad guard;
    CHECK_FALSE(grad_enabled());
    y = exp(x);
  }
  CHECK(grad_enabled());
  CHECK_FALSE(y.tracked());
  CHECK(exp(x).tracked());
}

TEST_CASE("views carry gradients back to their base") {
  // f(x) = sum(slice(x, 1, 0, 3, 2) * w) over a [2, 4] x: only columns 0 and 2 get w.
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  auto [value, grads] = value_and_grad([](const std::vector<Tensor>& in) {
    Tensor s = slice(transpose(reshape(in[0], {4, 2})), 1, 0, 3, 2);  // [2, 2] of a transposed view
    Tensor w = from_vector(std::vector<double>{1, 10, 100, 1000}, {2, 2});
    return sum(s * w);
  }, {x});
  // reshape to [4, 2] then transpose gives t[c][r] = x_flat[r * 2 + c]; slice columns r = 0, 2:
  // s[c][k] = x_flat[(2k) * 2 + c] for k in {0, 1}: weights w[c][k].
  check_close(grads[0], {1, 100, 0, 0, 10, 1000, 0, 0});
}

// The engine writes a slice's cotangent into its place in its input's (Node::region): parts that
// cover the input, parts that overlap, a part beside a whole use, strided parts, a slice of a
// slice, and a slice whose own gradient is asked for. Expected: d/dx of sum(part_i * w_i) puts
// w_i at the places part_i reads, added where parts overlap, worked out index by index.
TEST_CASE("slices of one value: their cotangents are assembled in place") {
  const int64_t rows = 3, cols = 7;
  Generator gen(11);
  const Tensor x = randn({rows, cols}, gen, DType::f64);
  // w_i of the shape of part i, fresh random values.
  auto weight_for = [&](const Tensor& part) { return randn(part.shape(), gen, DType::f64); };
  struct Part {
    int64_t axis, start, stop, step;
  };
  auto check_parts = [&](const std::vector<Part>& parts, bool whole_too) {
    std::vector<Tensor> weights;
    for (const Part& p : parts) weights.push_back(weight_for(slice(x, p.axis, p.start, p.stop, p.step)));
    const Tensor c = randn({rows, cols}, gen, DType::f64);
    auto [value, grads] = value_and_grad([&](const std::vector<Tensor>& in) {
      // Without a whole use, x's cotangent comes from the parts alone (written in place when they
      // cover x).
      Tensor total = whole_too ? sum(in[0] * c) : Tensor();
      for (size_t i = 0; i < parts.size(); ++i) {
        const Part& p = parts[i];
        const Tensor term = sum(slice(in[0], p.axis, p.start, p.stop, p.step) * weights[i]);
        total = total.defined() ? total + term : term;
      }
      return total;
    }, {x});
    std::vector<double> expected(size_t(rows * cols), 0.0);
    if (whole_too) expected = c.to_vector<double>();
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part& p = parts[i];
      const std::vector<double> w = weights[i].to_vector<double>();
      const int64_t n = p.axis == 0 ? rows : cols, len = (p.stop - p.start + p.step - 1) / p.step;
      REQUIRE(p.stop <= n);
      for (int64_t r = 0; r < (p.axis == 0 ? len : rows); ++r)
        for (int64_t j = 0; j < (p.axis == 1 ? len : cols); ++j) {
          const int64_t xr = p.axis == 0 ? p.start + r * p.step : r, xc = p.axis == 1 ? p.start + j * p.step : j;
          expected[size_t(xr * cols + xc)] += w[size_t(r * (p.axis == 1 ? len : cols) + j)];
        }
    }
    check_close(grads[0], expected);
  };
  SUBCASE("parts that cover the columns") { check_parts({{1, 0, 2, 1}, {1, 2, 5, 1}, {1, 5, 7, 1}}, false); }
  SUBCASE("covering parts, out of order") { check_parts({{1, 4, 7, 1}, {1, 0, 4, 1}}, false); }
  SUBCASE("parts that overlap") { check_parts({{1, 0, 5, 1}, {1, 3, 7, 1}}, false); }
  SUBCASE("parts that leave a gap") { check_parts({{1, 0, 2, 1}, {1, 4, 7, 1}}, false); }
  SUBCASE("a part beside a whole use") { check_parts({{1, 1, 6, 1}}, true); }
  SUBCASE("strided parts on two axes") { check_parts({{1, 0, 7, 2}, {1, 1, 7, 2}, {0, 1, 3, 1}}, true); }
  SUBCASE("an empty part") { check_parts({{1, 0, 7, 1}, {1, 3, 3, 1}}, false); }

  SUBCASE("parts whose cotangents already lie side by side in one buffer") {
    // y = x (a probe that keeps the cotangent it is handed), cut into columns [0, 3) and [3, 7);
    // one op takes both parts and hands back their cotangents as views of one buffer, each in
    // its part's place (as swiglu's kernels do for the joint gate/up projection), or swapped.
    for (bool in_place : {true, false}) {
      CAPTURE(in_place);
      const Tensor buffer = randn({rows, cols}, gen, DType::f64);
      const Tensor left = slice(buffer, 1, 0, 3), right = slice(buffer, 1, 3, 7);
      // Swapped: the same values, but the view of the right part is taken from the left columns.
      const Tensor right_elsewhere = contiguous(right);
      Tensor seen;
      const Tensor xt = track(x);
      const Tensor y = record("probe", xt.detach(), {xt}, [&seen](const Tensor& c) {
        seen = c;
        return std::vector{c};
      });
      const Tensor out = record("pair", zeros({}, DType::f64), {slice(y, 1, 0, 3), slice(y, 1, 3, 7)},
                                [&](const Tensor&) { return std::vector{left, in_place ? right : right_elsewhere}; });
      const Tensor g = gradients(out, ones({}, DType::f64), {xt})[0];
      check_close(g, buffer.to_vector<double>());
      check_close(seen, buffer.to_vector<double>());
      CHECK(seen.same_storage(buffer) == in_place);
    }
  }

  SUBCASE("a slice of a slice, and the gradient of a slice itself") {
    const Tensor w = randn({rows, 2}, gen, DType::f64);
    const Tensor xt = track(x);
    const Tensor outer = slice(xt, 1, 2, 6);     // columns 2..5
    const Tensor inner = slice(outer, 1, 1, 3);  // columns 3, 4 of x
    const std::vector<Tensor> g = gradients(sum(inner * w), ones({}, DType::f64), {xt, outer});
    std::vector<double> expected_x(size_t(rows * cols), 0.0), expected_outer(size_t(rows * 4), 0.0);
    const std::vector<double> wv = w.to_vector<double>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 2; ++j) {
        expected_x[size_t(r * cols + 3 + j)] = wv[size_t(r * 2 + j)];
        expected_outer[size_t(r * 4 + 1 + j)] = wv[size_t(r * 2 + j)];
      }
    check_close(g[0], expected_x);
    check_close(g[1], expected_outer);
  }
}

TEST_CASE("checkpoint gives the same gradients and recomputes in the backward pass") {
  Tensor x = from_vector(std::vector<double>{0.3, -1.2, 2.0}, {3});
  int forward_calls = 0, recomputed_calls = 0;
  Function block = [&](const std::vector<Tensor>& in) {
    ++forward_calls;
    if (recomputing()) ++recomputed_calls;
    return tanh(in[0]) * exp(in[0]);
  };
  auto [plain, plain_grads] = value_and_grad([&](const std::vector<Tensor>& in) { return sum(block(in)); }, {x});
  forward_calls = recomputed_calls = 0;
  auto [ck, ck_grads] = value_and_grad([&](const std::vector<Tensor>& in) { return sum(checkpoint(block, in)); }, {x});
  CHECK(forward_calls == 2);
  CHECK(recomputed_calls == 1);
  CHECK(ck.item<double>() == plain.item<double>());
  auto a = ck_grads[0].to_vector<double>(), b = plain_grads[0].to_vector<double>();
  CHECK(a == b);
  // d/dx tanh(x) e^x = e^x (1 - tanh^2 + tanh)
  for (size_t i = 0; i < 3; ++i) {
    double v = x.to_vector<double>()[i], t = std::tanh(v);
    CHECK(a[i] == doctest::Approx(std::exp(v) * (1 - t * t + t)).epsilon(1e-12));
  }
}

TEST_CASE("same_on_recompute: the recomputation sees the first run's values, nested checkpoints included") {
  Tensor x = from_vector(std::vector<double>{0.5, -0.25}, {2});
  // A value that changes every time it is computed, as a running average updated from a
  // variable the function captures would.
  double scale = 1;
  int computed = 0;
  auto next_scale = [&] {
    ++computed;
    scale *= 2;
    return full({2}, scale, DType::f64);
  };
  Function inner = [&](const std::vector<Tensor>& in) { return in[0] * same_on_recompute(next_scale); };
  Function outer = [&](const std::vector<Tensor>& in) {
    return checkpoint(inner, {in[0] * same_on_recompute(next_scale)});
  };
  auto [y, grads] = value_and_grad([&](const std::vector<Tensor>& in) { return sum(checkpoint(outer, in)); }, {x});
  // The first run drew 2 and 4; both recomputations (outer, then inner) replayed them.
  CHECK(computed == 2);
  CHECK(y.item<double>() == doctest::Approx(8 * 0.25).epsilon(1e-15));
  CHECK(grads[0].to_vector<double>() == std::vector<double>{8.0, 8.0});
  // Outside checkpoint() every call computes, and the value is a constant: d/dx x * (3 x)_const = 3 x.
  auto [v, g] = value_and_grad(
      [&](const std::vector<Tensor>& in) { return sum(in[0] * same_on_recompute([&] { return in[0] * 3.0; })); }, {x});
  CHECK(g[0].to_vector<double>() == std::vector<double>{1.5, -0.75});
  CHECK(computed == 2);
  CHECK(same_on_recompute(next_scale).to_vector<double>() == std::vector<double>{8.0, 8.0});
  CHECK(computed == 3);
}

TEST_CASE("same_on_recompute: a recomputation that takes another path is refused") {
  Tensor x = from_vector(std::vector<double>{0.5}, {1});
  auto one = [] { return full({1}, 1.0, DType::f64); };
  Function fewer = [&](const std::vector<Tensor>& in) { return recomputing() ? in[0] : in[0] * same_on_recompute(one); };
  Function more = [&](const std::vector<Tensor>& in) { return recomputing() ? in[0] * same_on_recompute(one) : in[0]; };
  auto run = [&](const Function& f) {
    return value_and_grad([&](const std::vector<Tensor>& in) { return sum(checkpoint(f, in)); }, {x});
  };
  CHECK_THROWS_WITH_AS(run(fewer),
                       "[checkpoint] the recomputation used 0 of the 1 values kept by its first run: the "
                       "checkpointed function must take the same path when it runs again",
                       Error);
  CHECK_THROWS_WITH_AS(run(more),
                       "[checkpoint] the recomputation asks for more kept values than the 0 of its first run: the "
                       "checkpointed function must take the same path when it runs again",
                       Error);
}

TEST_CASE("vjp with a non-scalar output") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3});
  Tensor v = from_vector(std::vector<double>{1, 0, -1}, {3});
  auto [y, grads] = vjp([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {x}, v);
  check_close(y, {1, 4, 9});
  check_close(grads[0], {2, 0, -6});
}

TEST_CASE("value_and_grad refuses non-scalar outputs") {
  Tensor x = zeros({2}, DType::f64);
  CHECK_THROWS_WITH_AS(value_and_grad([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, {x}),
                       "[value_and_grad] f must return a single value, got shape [2]", Error);
}

TEST_CASE("a pullback returning the wrong shape is reported with the op's name") {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2});
  auto bad = [](const std::vector<Tensor>& in) {
    Tensor y = record("bad_op", in[0].detach() * 1.0, {in[0]},
                      [](const Tensor&) { return std::vector{zeros({3}, DType::f64)}; });
    return sum(y);
  };
  CHECK_THROWS_WITH_AS(value_and_grad(bad, {x}),
                       "[bad_op] pullback gave input 0 a cotangent [3] f64 for a value [2] f64", Error);
}

namespace {

// Spins until `flag` is set or `limit` has passed; whether it was set.
bool wait_for(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!flag.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  return flag.load();
}

}  // namespace

TEST_CASE("concurrently: b beside a on another thread, recording nothing; a with the caller's grad mode") {
  if (tbb::this_task_arena::max_concurrency() < 2) {
    MESSAGE("one core: only the sequential paths are checked");
  } else {
    // a waits for b to start, which only another thread can do while a runs (a deadline keeps a
    // failure from hanging). b records nothing even inside value_and_grad (the other thread's
    // own grad mode is on); a records as its caller does.
    Tensor x = from_vector(std::vector<double>{0.5, -2.0, 3.0}, {3});
    std::atomic<bool> b_started{false};
    bool a_saw_b = false;
    std::thread::id b_thread;
    Tensor by_b;
    auto [value, grads] = value_and_grad(
        [&](const std::vector<Tensor>& in) {
          Tensor by_a;
          concurrently(
              Device::cpu(),
              [&] {
                a_saw_b = wait_for(b_started, std::chrono::seconds(20));
                by_a = in[0] * in[0];
              },
              [&] {
                b_thread = std::this_thread::get_id();
                by_b = in[0] * 3.0;
                b_started = true;
              });
          CHECK(by_a.tracked());
          return sum(by_a + by_b);
        },
        {x});
    CHECK(a_saw_b);
    CHECK(b_thread != std::this_thread::get_id());
    CHECK_FALSE(by_b.tracked());
    CHECK(grads[0].to_vector<double>() == std::vector<double>{1.0, -4.0, 6.0});  // 2 x: b's part is a constant
    NoGrad no_grad;
    Tensor by_a;
    concurrently(Device::cpu(), [&] { by_a = track(x) * 2.0; }, [] {});
    CHECK_FALSE(by_a.tracked());
  }

  // One thread, or another device: a, then b, both on the calling thread.
  std::vector<std::string> order;
  std::thread::id a_thread, b_thread;
  auto in_order = [&](Device device) {
    order.clear();
    concurrently(
        device,
        [&] {
          order.push_back("a");
          a_thread = std::this_thread::get_id();
        },
        [&] {
          order.push_back("b");
          b_thread = std::this_thread::get_id();
        });
    CHECK(order == std::vector<std::string>{"a", "b"});
    CHECK(a_thread == std::this_thread::get_id());
    CHECK(b_thread == std::this_thread::get_id());
  };
  in_order(Device::cuda());
  tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
  in_order(Device::cpu());
}

TEST_CASE("concurrently: in sequence inside a checkpoint; recomputing() carried into b; the first error rethrown") {
  // In a checkpointed function, same_on_recompute keeps values on the calling thread: b runs
  // there, after a (a gives it time to start elsewhere and checks that it did not), and its kept
  // value is replayed by the recomputation.
  Tensor x = from_vector(std::vector<double>{0.5, -0.25}, {2});
  double scale = 1;
  std::vector<std::thread::id> b_threads;
  std::vector<bool> b_before_a_ended;
  Function block = [&](const std::vector<Tensor>& in) {
    Tensor first, second;
    std::atomic<bool> b_started{false};
    concurrently(
        Device::cpu(),
        [&] {
          b_before_a_ended.push_back(wait_for(b_started, std::chrono::milliseconds(200)));
          first = in[0] * 2.0;
        },
        [&] {
          b_started = true;
          b_threads.push_back(std::this_thread::get_id());
          second = same_on_recompute([&] {
            scale *= 2;
            return full({2}, scale, DType::f64);
          });
        });
    return first * second;
  };
  auto [y, grads] = value_and_grad([&](const std::vector<Tensor>& in) { return sum(checkpoint(block, in)); }, {x});
  REQUIRE(b_threads.size() == 2);  // the first run and the recomputation
  CHECK(b_before_a_ended == std::vector<bool>{false, false});
  CHECK(b_threads[0] == std::this_thread::get_id());
  CHECK(b_threads[1] == std::this_thread::get_id());
  CHECK(grads[0].to_vector<double>() == std::vector<double>{4.0, 4.0});  // 2 times the kept 2 (a new draw: 8)
  CHECK(scale == 2);

  // A pullback inside a checkpoint runs while recomputing() holds (the backward of the
  // recomputed layer): b sees it too, on whatever thread runs it (another one, when there is one:
  // a waits for b to start).
  const auto b_start_limit =
      tbb::this_task_arena::max_concurrency() >= 2 ? std::chrono::milliseconds(20000) : std::chrono::milliseconds(0);
  std::vector<int> b_recomputing;
  Function probe = [&](const std::vector<Tensor>& in) {
    const Tensor y = in[0] * 1.0;
    return record("probe", y.detach(), {in[0]}, [&](const Tensor& g) {
      std::atomic<bool> b_started{false};
      concurrently(
          Device::cpu(), [&] { wait_for(b_started, b_start_limit); },
          [&] {
            b_recomputing.push_back(recomputing() ? 1 : 0);
            b_started = true;
          });
      return std::vector<Tensor>{g};
    });
  };
  value_and_grad([&](const std::vector<Tensor>& in) { return sum(checkpoint(probe, in)); }, {x});
  value_and_grad([&](const std::vector<Tensor>& in) { return sum(probe(in)); }, {x});
  CHECK(b_recomputing == std::vector<int>{1, 0});

  // Errors: both run to their end, then a's error is rethrown before b's; on one thread too.
  for (const int threads : {2, 1}) {
    INFO("threads: ", threads);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    bool b_ended = false;
    CHECK_THROWS_WITH_AS(concurrently(
                             Device::cpu(), [] { fail("first", "a failed"); },
                             [&] {
                               b_ended = true;
                               fail("second", "b failed");
                             }),
                         "[first] a failed", Error);
    CHECK(b_ended);
    bool a_ended = false;
    CHECK_THROWS_WITH_AS(concurrently(Device::cpu(), [&] { a_ended = true; }, [] { fail("second", "b failed"); }),
                         "[second] b failed", Error);
    CHECK(a_ended);
  }
}

TEST_CASE("a layer's forward and backward run the three products of x W^T") {
  // y = x W^T, x [B, in], W [out, in]: the forward is x times W read transposed (nt); the backward
  // dX = G W (nn, [B, out] x [out, in]) and dW = G^T x (tn, [out, B] x [B, in]). The order of the
  // two backward products is the engine's; they are compared as a set.
  Generator gen(5);
  const int64_t batch = 6, in = 4, out = 3;
  Tensor x = randn({batch, in}, gen, DType::f64), w = randn({out, in}, gen, DType::f64);
  Tensor c = randn({batch, out}, gen, DType::f64);  // a loss whose G is not all ones
  std::vector<ProductShape> seen;
  {
    ProductLog log;
    value_and_grad([&](const std::vector<Tensor>& in) { return sum(matmul(in[0], transpose(in[1])) * c); }, {x, w});
    seen = log.products();
  }
  auto product = [](int64_t m, int64_t n, int64_t k, char a, char b) {
    return ProductShape{1, m, n, k, a, b, false, DType::f64, Device::cpu()};
  };
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == product(batch, out, in, 'n', 't'));
  const ProductShape dx = product(batch, in, out, 'n', 'n'), dw = product(out, in, batch, 't', 'n');
  CHECK(((seen[1] == dx && seen[2] == dw) || (seen[1] == dw && seen[2] == dx)));
}
