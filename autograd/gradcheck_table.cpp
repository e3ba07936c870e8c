// One line per gradient check. Each case returns the function under test and its inputs; the
// function must be pure in its inputs (dropout copies its Generator, so every evaluation draws
// the same mask).
#include "autograd/gradcheck_table.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

#include "tensor/ops.hpp"
#include "util/hash.hpp"

namespace cotan {

namespace {

using X = const std::vector<Tensor>&;

using Case = GradcheckCase;
using Maker = std::function<Case(Generator&)>;

// FNV-1a of the name, mixed with the seed: each case draws its own numbers.
uint64_t case_seed(uint64_t seed, std::string_view name) { return fnv1a(name) ^ (seed * 0x9E3779B97F4A7C15ull); }

using gradcheck_inputs::normal;
using gradcheck_inputs::positive;

// Moves every element within `margin` of one of `points` out to distance `margin` (the points
// must be more than 2 * margin apart): keeps kinks out of reach of the finite differences.
Tensor away_from(const Tensor& x, std::vector<double> points, double margin) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v)
    for (double p : points)
      if (std::abs(e - p) < margin) e = p + (e < p ? -margin : margin);
  return from_vector(v, x.shape());
}

// Normal values pushed away from 0.
Tensor nonzero(const Shape& shape, Generator& gen, double margin) {
  return away_from(normal(shape, gen), {0.0}, margin);
}

// All elements distinct, at least 0.2 apart, in random order: max and min have a unique winner.
Tensor distinct(const Shape& shape, Generator& gen) {
  int64_t n = numel(shape);
  std::vector<double> order_key = rand({n}, gen, DType::f64).to_vector<double>();
  std::vector<double> jitter = rand({n}, gen, DType::f64).to_vector<double>();
  std::vector<size_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), size_t(0));
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) { return order_key[a] < order_key[b]; });
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t rank = 0; rank < perm.size(); ++rank)
    v[perm[rank]] = (double(rank) - double(n) / 2) * 0.25 + 0.05 * jitter[perm[rank]];
  return from_vector(v, shape);
}

Tensor indices(const Shape& shape, int64_t high, Generator& gen, DType dtype = DType::i64) {
  return randint(shape, 0, high, gen, dtype);
}

// b + d with |d| >= 0.1 everywhere: no ties between a and b (b broadcast to `shape`).
Tensor apart_from(const Tensor& b, const Shape& shape, Generator& gen) {
  return add(b, nonzero(shape, gen, 0.1));
}

}  // namespace

namespace gradcheck_inputs {
Tensor normal(const Shape& shape, Generator& gen) { return randn(shape, gen, DType::f64); }
Tensor positive(const Shape& shape, Generator& gen) { return rand(shape, gen, DType::f64) + 0.5; }
}  // namespace gradcheck_inputs

OpCheck make_op_check(std::string name, std::function<GradcheckCase(Generator&)> make) {
  return {name, [name, make](uint64_t seed) {
            Generator gen(case_seed(seed, name));
            Case c = make(gen);
            GradcheckOptions options;
            options.seed = seed;
            return gradcheck(c.f, c.inputs, options);
          },
          [name, make](uint64_t seed, Device device) {
            Generator gen(case_seed(seed, name));
            Case c = make(gen);
            GradcheckOptions options;
            options.seed = seed;
            options.rtol = kDeviceCompareRtol;
            return compare_devices(c.f, c.inputs, device, options);
          }};
}

namespace {

std::vector<OpCheck> build() {
  std::vector<OpCheck> t;
  auto add_case = [&](std::string name, Maker make) { t.push_back(make_op_check(std::move(name), std::move(make))); };

  // ---- unary ----
  add_case("neg", [](Generator& g) -> Case { return {[](X x) { return neg(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("exp", [](Generator& g) -> Case { return {[](X x) { return exp(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("log", [](Generator& g) -> Case { return {[](X x) { return log(x[0]); }, {positive({3, 4}, g)}}; });
  add_case("sqrt", [](Generator& g) -> Case { return {[](X x) { return sqrt(x[0]); }, {positive({3, 4}, g)}}; });
  add_case("rsqrt", [](Generator& g) -> Case { return {[](X x) { return rsqrt(x[0]); }, {positive({3, 4}, g)}}; });
  add_case("tanh", [](Generator& g) -> Case { return {[](X x) { return tanh(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("sigmoid", [](Generator& g) -> Case { return {[](X x) { return sigmoid(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("silu", [](Generator& g) -> Case { return {[](X x) { return silu(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("softplus", [](Generator& g) -> Case {
    return {[](X x) { return softplus(x[0]); }, {normal({3, 4}, g) * 8.0}};  // both tails: e^x and x
  });
  add_case("relu", [](Generator& g) -> Case { return {[](X x) { return relu(x[0]); }, {nonzero({3, 4}, g, 0.1)}}; });
  add_case("gelu_tanh", [](Generator& g) -> Case {
    return {[](X x) { return gelu_tanh(x[0]); }, {normal({3, 4}, g)}};
  });
  add_case("abs", [](Generator& g) -> Case { return {[](X x) { return abs(x[0]); }, {nonzero({3, 4}, g, 0.1)}}; });
  add_case("clamp", [](Generator& g) -> Case {
    return {[](X x) { return clamp(x[0], -0.5, 0.5); }, {away_from(normal({3, 4}, g), {-0.5, 0.5}, 0.1)}};
  });
  add_case("pow", [](Generator& g) -> Case { return {[](X x) { return pow(x[0], 2.5); }, {positive({3, 4}, g)}}; });
  add_case("pow_integer", [](Generator& g) -> Case {
    return {[](X x) { return pow(x[0], 3.0); }, {normal({3, 4}, g)}};
  });
  add_case("square", [](Generator& g) -> Case { return {[](X x) { return square(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("reciprocal", [](Generator& g) -> Case {
    return {[](X x) { return reciprocal(x[0]); }, {nonzero({3, 4}, g, 0.5)}};
  });

  // ---- binary, with broadcasting ----
  add_case("add", [](Generator& g) -> Case {
    return {[](X x) { return add(x[0], x[1]); }, {normal({3, 1, 4}, g), normal({2, 4}, g)}};
  });
  add_case("add_scalar_tensor", [](Generator& g) -> Case {
    return {[](X x) { return add(x[0], x[1]); }, {normal({3, 4}, g), normal({}, g)}};
  });
  add_case("sub", [](Generator& g) -> Case {
    return {[](X x) { return sub(x[0], x[1]); }, {normal({2, 3}, g), normal({3}, g)}};
  });
  add_case("mul", [](Generator& g) -> Case {
    return {[](X x) { return mul(x[0], x[1]); }, {normal({2, 3, 4}, g), normal({3, 1}, g)}};
  });
  add_case("div", [](Generator& g) -> Case {
    return {[](X x) { return div(x[0], x[1]); }, {normal({3, 4}, g), nonzero({4}, g, 0.5)}};
  });
  add_case("maximum", [](Generator& g) -> Case {
    Tensor b = normal({4}, g);
    return {[](X x) { return maximum(x[0], x[1]); }, {apart_from(b, {3, 4}, g), b}};
  });
  add_case("minimum", [](Generator& g) -> Case {
    Tensor b = normal({3, 1}, g);
    return {[](X x) { return minimum(x[0], x[1]); }, {b, apart_from(b, {3, 4}, g)}};
  });
  add_case("where", [](Generator& g) -> Case {
    Tensor cond = gt(normal({3, 4}, g), scalar(0.0, DType::f64));  // an input: it moves with the others
    return {[](X x) { return where(x[2], x[0], x[1]); }, {normal({3, 4}, g), normal({4}, g), cond}};
  });
  add_case("scalar_operators", [](Generator& g) -> Case {
    return {[](X x) { return (2.0 - x[0] * 3.0) / 1.5 + 0.5 / x[0] - (x[0] + 1.0) * (1.0 + x[0]); },
            {nonzero({3, 4}, g, 0.5)}};
  });
  add_case("fan_out", [](Generator& g) -> Case {
    return {[](X x) { return x[0] * x[0] + exp(x[0]) * x[1]; }, {normal({3, 4}, g), normal({4}, g)}};
  });

  // ---- reductions ----
  add_case("sum", [](Generator& g) -> Case { return {[](X x) { return sum(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("sum_axes_keepdim", [](Generator& g) -> Case {
    return {[](X x) { return sum(x[0], {0, 2}, true); }, {normal({2, 3, 4}, g)}};
  });
  add_case("mean", [](Generator& g) -> Case { return {[](X x) { return mean(x[0], {1}); }, {normal({3, 4, 2}, g)}}; });
  add_case("mean_all", [](Generator& g) -> Case { return {[](X x) { return mean(x[0]); }, {normal({3, 4}, g)}}; });
  add_case("max", [](Generator& g) -> Case { return {[](X x) { return max(x[0], {1}); }, {distinct({3, 5}, g)}}; });
  add_case("max_all", [](Generator& g) -> Case { return {[](X x) { return max(x[0]); }, {distinct({3, 4}, g)}}; });
  add_case("min_keepdim", [](Generator& g) -> Case {
    return {[](X x) { return min(x[0], {0}, true); }, {distinct({4, 3}, g)}};
  });
  add_case("var", [](Generator& g) -> Case {
    return {[](X x) { return var(x[0], {1}, true, 1); }, {normal({3, 5}, g)}};
  });
  add_case("var_all", [](Generator& g) -> Case { return {[](X x) { return var(x[0]); }, {normal({2, 3, 2}, g)}}; });
  add_case("sum_to", [](Generator& g) -> Case {
    return {[](X x) { return sum_to(x[0], {3, 1}); }, {normal({2, 3, 4}, g)}};
  });

  // ---- softmax family ----
  add_case("softmax", [](Generator& g) -> Case { return {[](X x) { return softmax(x[0]); }, {normal({3, 5}, g)}}; });
  add_case("softmax_axis0", [](Generator& g) -> Case {
    return {[](X x) { return softmax(x[0], 0); }, {normal({4, 3}, g)}};
  });
  add_case("log_softmax", [](Generator& g) -> Case {
    return {[](X x) { return log_softmax(x[0]); }, {normal({3, 5}, g)}};
  });
  add_case("logsumexp", [](Generator& g) -> Case {
    return {[](X x) { return logsumexp(x[0]); }, {normal({3, 5}, g)}};
  });
  add_case("logsumexp_axes_keepdim", [](Generator& g) -> Case {
    return {[](X x) { return logsumexp(x[0], {0, 2}, true); }, {normal({2, 3, 4}, g)}};
  });

  // ---- linear algebra ----
  add_case("matmul", [](Generator& g) -> Case {
    return {[](X x) { return matmul(x[0], x[1]); }, {normal({3, 4}, g), normal({4, 5}, g)}};
  });
  add_case("matmul_transposed", [](Generator& g) -> Case {
    return {[](X x) { return matmul(transpose(x[0]), transpose(x[1])); }, {normal({4, 3}, g), normal({5, 4}, g)}};
  });
  add_case("matmul_batched", [](Generator& g) -> Case {
    return {[](X x) { return matmul(x[0], x[1]); }, {normal({2, 3, 4}, g), normal({4, 5}, g)}};
  });
  // A batch through a strided view (the rows fold into one product through a copy), and a
  // batch times a vector.
  add_case("matmul_batched_strided", [](Generator& g) -> Case {
    return {[](X x) {
              return concat({flatten(matmul(permute(x[0], {1, 0, 2}), x[1])), flatten(matmul(x[0], x[2]))});
            },
            {normal({3, 2, 4}, g), normal({4, 5}, g), normal({4}, g)}};
  });
  add_case("matmul_batch_broadcast", [](Generator& g) -> Case {
    return {[](X x) { return matmul(x[0], x[1]); }, {normal({2, 1, 3, 4}, g), normal({3, 4, 2}, g)}};
  });
  add_case("matmul_vector", [](Generator& g) -> Case {
    return {[](X x) { return concat({matmul(x[0], x[1]), matmul(x[1], x[2])}); },
            {normal({4}, g), normal({4, 3}, g), normal({3}, g)}};
  });

  // ---- indexing (integer inputs pass through unchecked) ----
  add_case("gather", [](Generator& g) -> Case {
    return {[](X x) { return gather(x[0], 1, x[1]); }, {normal({4, 5}, g), indices({4, 3}, 5, g)}};
  });
  add_case("gather_axis0", [](Generator& g) -> Case {
    return {[](X x) { return gather(x[0], 0, x[1]); }, {normal({4, 5}, g), indices({2, 5}, 4, g, DType::i32)}};
  });
  add_case("scatter_add", [](Generator& g) -> Case {
    return {[](X x) { return scatter_add(x[0], 1, x[1], x[2]); },
            {normal({4, 5}, g), indices({4, 3}, 5, g), normal({4, 3}, g)}};
  });
  add_case("index_select", [](Generator& g) -> Case {
    return {[](X x) { return index_select(x[0], 0, x[1]); }, {normal({5, 3}, g), indices({4}, 5, g)}};
  });
  add_case("index_select_axis1", [](Generator& g) -> Case {
    return {[](X x) { return index_select(x[0], 1, x[1]); }, {normal({3, 5}, g), indices({6}, 5, g, DType::i32)}};
  });
  add_case("index_add", [](Generator& g) -> Case {
    return {[](X x) { return index_add(x[0], 0, x[1], x[2]); },
            {normal({5, 3}, g), indices({4}, 5, g), normal({4, 3}, g)}};
  });
  add_case("embedding", [](Generator& g) -> Case {
    return {[](X x) { return embedding(x[0], x[1]); }, {normal({6, 3}, g), indices({2, 4}, 6, g)}};
  });

  // ---- scans ----
  add_case("cumsum", [](Generator& g) -> Case { return {[](X x) { return cumsum(x[0], 1); }, {normal({3, 5}, g)}}; });
  add_case("cumsum_reverse", [](Generator& g) -> Case {
    return {[](X x) { return cumsum(x[0], 0, true); }, {normal({4, 3}, g)}};
  });

  // ---- shape and views ----
  add_case("reshape", [](Generator& g) -> Case {
    return {[](X x) { return reshape(x[0], {2, -1}); }, {normal({3, 4}, g)}};
  });
  add_case("reshape_strided", [](Generator& g) -> Case {
    return {[](X x) { return reshape(transpose(x[0]), {12}); }, {normal({3, 4}, g)}};
  });
  add_case("flatten", [](Generator& g) -> Case {
    return {[](X x) { return flatten(x[0], 1, 2); }, {normal({2, 3, 4}, g)}};
  });
  add_case("permute", [](Generator& g) -> Case {
    return {[](X x) { return permute(x[0], {2, 0, 1}); }, {normal({2, 3, 4}, g)}};
  });
  add_case("transpose", [](Generator& g) -> Case {
    return {[](X x) { return transpose(x[0]); }, {normal({3, 4}, g)}};
  });
  add_case("slice_step", [](Generator& g) -> Case {
    return {[](X x) { return slice(x[0], 1, 1, 7, 2); }, {normal({3, 8}, g)}};
  });
  add_case("broadcast_to", [](Generator& g) -> Case {
    return {[](X x) { return broadcast_to(x[0], {2, 3, 4}); }, {normal({3, 1}, g)}};
  });
  add_case("expand", [](Generator& g) -> Case { return {[](X x) { return expand(x[0], {3, 4}); }, {normal({4}, g)}}; });
  add_case("squeeze", [](Generator& g) -> Case {
    return {[](X x) { return squeeze(x[0], 1); }, {normal({3, 1, 4}, g)}};
  });
  add_case("squeeze_all", [](Generator& g) -> Case {
    return {[](X x) { return squeeze(x[0]); }, {normal({1, 3, 1}, g)}};
  });
  add_case("unsqueeze", [](Generator& g) -> Case {
    return {[](X x) { return unsqueeze(x[0], 1); }, {normal({3, 4}, g)}};
  });
  add_case("concat", [](Generator& g) -> Case {
    return {[](X x) { return concat({x[0], x[1], x[2]}, 1); },
            {normal({2, 3}, g), normal({2, 1}, g), normal({2, 2}, g)}};
  });
  add_case("stack", [](Generator& g) -> Case {
    return {[](X x) { return stack({x[0], x[1], x[2]}, 1); },
            {normal({2, 3}, g), normal({2, 3}, g), normal({2, 3}, g)}};
  });
  add_case("split", [](Generator& g) -> Case {
    return {[](X x) {
              std::vector<Tensor> p = split(x[0], {2, 3, 1}, 1);
              return concat({exp(p[0]), p[1] * 2.0, square(p[2])}, 1);
            },
            {normal({4, 6}, g)}};
  });
  add_case("chunk", [](Generator& g) -> Case {
    return {[](X x) {
              std::vector<Tensor> p = chunk(x[0], 3, 0);
              return p[0] * p[1] + p[2];
            },
            {normal({6, 2}, g)}};
  });
  add_case("contiguous", [](Generator& g) -> Case {
    return {[](X x) { return contiguous(transpose(x[0])) * x[1]; }, {normal({4, 3}, g), normal({3, 4}, g)}};
  });

  // ---- randomness and recomputation ----
  add_case("dropout", [](Generator& g) -> Case {
    Generator mask_gen(g.seed() + 1);
    return {[mask_gen](X x) {
              Generator copy = mask_gen;  // the same mask on every evaluation
              return dropout(x[0], 0.3, copy);
            },
            {normal({4, 5}, g)}};
  });
  add_case("checkpoint", [](Generator& g) -> Case {
    return {[](X x) {
              return checkpoint([](X y) { return tanh(matmul(y[0], y[1])) * sigmoid(sum(y[0], {1}, true)); }, x);
            },
            {normal({3, 4}, g), normal({4, 2}, g)}};
  });

  // ---- composites ----
  add_case("cross_entropy", [](Generator& g) -> Case {
    return {[](X x) {
              Tensor logits = matmul(x[0], x[1]);
              Tensor picked = squeeze(gather(logits, 1, unsqueeze(x[2], 1)), 1);
              return mean(logsumexp(logits) - picked);
            },
            {normal({4, 3}, g), normal({3, 5}, g), indices({4}, 5, g)}};
  });
  add_case("mlp", [](Generator& g) -> Case {
    return {[](X x) { return matmul(silu(matmul(x[0], x[1]) + x[2]), x[3]); },
            {normal({3, 4}, g), normal({4, 5}, g), normal({5}, g), normal({5, 2}, g)}};
  });

  return t;
}

}  // namespace

const std::vector<OpCheck>& primitive_op_checks() {
  static const std::vector<OpCheck> table = build();
  return table;
}

}  // namespace cotan
