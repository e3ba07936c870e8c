// Error messages say where and what: "[op] what was wrong". These pin the exact wording of a
// representative set, so that a change to one is a deliberate change.
#include <doctest/doctest.h>

#include <vector>

#include "autograd/autograd.hpp"
#include "tensor/device.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

using namespace cotan;

TEST_CASE("matmul: inner dimensions that do not match") {
  CHECK_THROWS_WITH_AS(matmul(zeros({4, 8}), zeros({9, 2})), "[matmul] shapes [4, 8] and [9, 2] do not match",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 3, 4}), zeros({5})), "[matmul] shapes [2, 3, 4] and [5] do not match",
                       cotan::Error);
}

TEST_CASE("broadcasting failure") {
  CHECK_THROWS_WITH_AS(add(zeros({3, 4}), zeros({5})), "[add] shapes [3, 4] and [5] cannot be broadcast",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(mul(zeros({2, 3}), zeros({3, 3})), "[mul] shapes [2, 3] and [3, 3] cannot be broadcast",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(broadcast_to(zeros({3, 2}), {3, 4}), "[broadcast_to] cannot broadcast [3, 2] to [3, 4]",
                       cotan::Error);
}

TEST_CASE("dtype mismatch in a binary op") {
  CHECK_THROWS_WITH_AS(add(zeros({2}, DType::f32), zeros({2}, DType::f64)), "[add] dtypes f32 and f64 do not match",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, DType::f64), zeros({2, 2}, DType::bf16)),
                       "[matmul] dtypes f64 and bf16 do not match", cotan::Error);
}

TEST_CASE("reshape to a wrong number of elements") {
  CHECK_THROWS_WITH_AS(reshape(zeros({3, 4}), {5, 3}), "[reshape] cannot reshape [3, 4] (12 elements) to [5, 3]",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(reshape(zeros({3, 4}), {5, -1}), "[reshape] cannot reshape [3, 4] (12 elements) to [5, -1]",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(reshape(zeros({3, 4}), {-1, -1}), "[reshape] shape [-1, -1] has more than one -1",
                       cotan::Error);
}

TEST_CASE("axis out of range") {
  CHECK_THROWS_WITH_AS(sum(zeros({3, 4}), {2}), "[sum] axis 2 is out of range for 2 dims", cotan::Error);
  CHECK_THROWS_WITH_AS(softmax(zeros({3, 4}), -3), "[softmax] axis -3 is out of range for 2 dims", cotan::Error);
  CHECK_THROWS_WITH_AS(transpose(zeros({3}), 0, 1), "[transpose] axis 1 is out of range for 1 dims", cotan::Error);
  CHECK_THROWS_WITH_AS(sum(zeros({3, 4}), {1, -1}), "[sum] axes [1, -1] repeat an axis", cotan::Error);
  CHECK_THROWS_WITH_AS(squeeze(zeros({3, 4}), 1), "[squeeze] axis 1 has size 4, not 1", cotan::Error);
}

TEST_CASE("gather and index_select: index out of range") {
  Tensor x = zeros({2, 3});
  Tensor bad = from_vector<int64_t>({0, 3}, {2, 1});
  CHECK_THROWS_WITH_AS(gather(x, 1, bad), "[gather] index 3 is out of range for axis 1 of size 3", cotan::Error);
  Tensor negative = from_vector<int64_t>({-1}, {1});
  CHECK_THROWS_WITH_AS(index_select(x, 0, negative), "[index_select] index -1 is out of range for axis 0 of size 2",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, zeros({2, 1})), "[gather] index must be i32 or i64, got f32", cotan::Error);
}

TEST_CASE("a float op on an integer tensor") {
  Tensor ints = arange(0, 4);
  CHECK_THROWS_WITH_AS(exp(ints), "[exp] expects a floating dtype, got i64", cotan::Error);
  CHECK_THROWS_WITH_AS(softmax(ints), "[softmax] expects a floating dtype, got i64", cotan::Error);
  CHECK_THROWS_WITH_AS(matmul(zeros({2, 2}, DType::i32), zeros({2, 2}, DType::i32)),
                       "[matmul] expects a floating dtype, got i32", cotan::Error);
}

TEST_CASE("item() on a tensor with more than one element") {
  CHECK_THROWS_WITH_AS(zeros({2, 3}).item<float>(), "[item] tensor of shape [2, 3] has 6 elements, not 1",
                       cotan::Error);
  CHECK(zeros({1, 1}).item<float>() == 0.0f);
}

TEST_CASE("from_vector with the wrong number of values") {
  CHECK_THROWS_WITH_AS(from_vector<float>({1, 2, 3, 4, 5}, {2, 3}),
                       "[from_vector] 5 values do not fill shape [2, 3] (6 elements)", cotan::Error);
}

TEST_CASE("unknown device strings") {
  CHECK_THROWS_WITH_AS(parse_device("tpu"), "[device] unknown device 'tpu' (expected cpu, cuda or cuda:N)",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(parse_device("cuda:x"), "[device] unknown device 'cuda:x' (expected cpu, cuda or cuda:N)",
                       cotan::Error);
  CHECK(parse_device("cuda:1") == Device::cuda(1));
}

TEST_CASE("value_and_grad of a function that does not return one value") {
  auto f = [](const std::vector<Tensor>& x) { return x[0] * 2.0; };
  CHECK_THROWS_WITH_AS(value_and_grad(f, {zeros({3})}), "[value_and_grad] f must return a single value, got shape [3]",
                       cotan::Error);
}

TEST_CASE("other argument errors") {
  CHECK_THROWS_WITH_AS(concat({zeros({2, 3}), zeros({3, 3})}, 1),
                       "[concat] input 1 of shape [3, 3] does not match input 0 of shape [2, 3] outside axis 1",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(split(zeros({5}), {2, 2}), "[split] sizes [2, 2] add up to 4, not the 5 of axis 0",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(clamp(zeros({2}), 1.0, 0.0), "[clamp] lower bound 1 is above upper bound 0", cotan::Error);
  CHECK_THROWS_WITH_AS(where(zeros({2}), zeros({2}), zeros({2})), "[where] condition must be bool, got f32",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(Tensor().shape(), "[tensor] use of an undefined tensor", cotan::Error);
}

namespace {

// A backend with the primitives only (the CPU's) and no fused kernel: the interface's defaults.
class PrimitivesOnly final : public Backend {
 public:
  std::string_view name() const override { return "primitives-only"; }
  std::shared_ptr<Storage> allocate(size_t n) override { return cpu().allocate(n); }
  void assign_kernel(const Tensor& dst, const Tensor& src) override { cpu().assign(dst, src); }
  void fill(const Tensor& dst, double v) override { cpu().fill(dst, v); }
  Tensor arange_kernel(double s, double d, int64_t n, DType t) override { return cpu().arange(s, d, n, t); }
  Tensor random_kernel(RandomOp op, const Shape& s, DType t, Generator& g, double a, double b) override {
    return cpu().random(op, s, t, g, a, b);
  }
  Tensor unary_kernel(UnaryOp op, const Tensor& x, double a, double b) override { return cpu().unary(op, x, a, b); }
  Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) override { return cpu().binary(op, a, b); }
  Tensor where_kernel(const Tensor& c, const Tensor& a, const Tensor& b) override { return cpu().where(c, a, b); }
  Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keep) override {
    return cpu().reduce(op, x, axes, keep);
  }
  Tensor softmax_kernel(const Tensor& x, int64_t axis) override { return cpu().softmax(x, axis); }
  Tensor log_softmax_kernel(const Tensor& x, int64_t axis) override { return cpu().log_softmax(x, axis); }
  Tensor logsumexp_kernel(const Tensor& x, int64_t axis) override { return cpu().logsumexp(x, axis); }
  Tensor cumsum_kernel(const Tensor& x, int64_t axis, bool reverse) override { return cpu().cumsum(x, axis, reverse); }
  Tensor matmul_kernel(const Tensor& a, const Tensor& b) override { return cpu().matmul(a, b); }
  Tensor gather_kernel(const Tensor& x, int64_t axis, const Tensor& i) override { return cpu().gather(x, axis, i); }
  Tensor scatter_add_kernel(const Tensor& base, int64_t axis, const Tensor& i, const Tensor& src) override {
    return cpu().scatter_add(base, axis, i, src);
  }
  Tensor index_select_kernel(const Tensor& x, int64_t axis, const Tensor& i) override {
    return cpu().index_select(x, axis, i);
  }
  Tensor index_add_kernel(const Tensor& base, int64_t axis, const Tensor& i, const Tensor& src) override {
    return cpu().index_add(base, axis, i, src);
  }

 private:
  static Backend& cpu() { return cpu_backend(); }
};

}  // namespace

TEST_CASE("a backend without a fused kernel names the op and the backend") {
  PrimitivesOnly b;
  const Tensor x = zeros({2, 4});
  CHECK(b.has_attention_kernel(DType::f32));  // a missing kernel throws rather than composing silently
  CHECK_THROWS_WITH_AS(b.attention_forward(AttentionSpec{}), "[attention] the primitives-only backend has no kernel",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(b.rms_norm_forward(x, zeros({4}), 1e-6), "[rms_norm] the primitives-only backend has no kernel",
                       cotan::Error);
  CHECK_THROWS_WITH_AS(b.swiglu_backward(x, x, x), "[swiglu] the primitives-only backend has no kernel", cotan::Error);
  CHECK_THROWS_WITH_AS(b.rope_forward(x, x, x), "[rope] the primitives-only backend has no kernel", cotan::Error);
  CHECK_THROWS_WITH_AS(b.kd_loss(x, x, Tensor(), KdLossConfig{}, true, Tensor()),
                       "[kd_loss] the primitives-only backend has no kernel", cotan::Error);
  CHECK_THROWS_WITH_AS(b.adamw_update(x, x, x, x, AdamWScalars<double>{}),
                       "[adamw] the primitives-only backend has no kernel", cotan::Error);
  CHECK_THROWS_WITH_AS(b.squared_norm({x}), "[global_norm] the primitives-only backend has no kernel", cotan::Error);
  // The CPU backend has them all.
  CHECK(cpu_backend().squared_norm({full({2, 2}, 3.0)}).item<double>() == 36.0);
}
