// Every differentiable op against central differences (the table in autograd/gradcheck_table.cpp),
// and gradcheck's own ability to notice a wrong pullback.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/gradcheck.hpp"
#include "autograd/gradcheck_table.hpp"
#include "train/gradcheck_cases.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

using namespace cotan;

TEST_CASE("op table: every op passes its gradient check") {
  const auto& checks = train::op_checks();
  CHECK(checks.size() >= 35);
  for (const OpCheck& c : checks) {
    SUBCASE(c.name.c_str()) {
      INFO("op: ", c.name);
      GradcheckResult r;
      REQUIRE_NOTHROW(r = c.run(0));
      INFO(r.describe());
      CHECK(r.pass);
      CHECK(r.max_rel_err <= 1e-6);
    }
  }
}

TEST_CASE("op table: passes with another seed") {
  for (const OpCheck& c : train::op_checks()) {
    INFO("op: ", c.name);
    try {
      GradcheckResult r = c.run(12345);
      INFO(r.describe());
      CHECK(r.pass);
    } catch (const std::exception& e) {
      FAIL_CHECK(e.what());
    }
  }
}

TEST_CASE("op table: every differentiable op of the op list has a gradient check") {
  // The op list (tensor/op_table.hpp) is the source: a new unary or binary op without an entry
  // in the gradcheck table fails here. logical_not and the comparisons have bool results; sign's
  // gradient is zero almost everywhere.
  std::vector<std::string> names;
  for (const OpCheck& c : train::op_checks()) names.push_back(c.name);
  auto has = [&](std::string_view name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  for (UnaryOp op : kUnaryOps)
    if (op != UnaryOp::logical_not && op != UnaryOp::sign) CHECK_MESSAGE(has(op_name(op)), op_name(op));
  for (BinaryOp op : kBinaryOps)
    if (!is_comparison(op)) CHECK_MESSAGE(has(op_name(op)), op_name(op));
}

TEST_CASE("op table: names are unique") {
  const auto& checks = train::op_checks();
  for (size_t i = 0; i < checks.size(); ++i)
    for (size_t j = i + 1; j < checks.size(); ++j) CHECK(checks[i].name != checks[j].name);
}

namespace {

// exp with a pullback that returns twice the true cotangent.
Tensor doubled_exp(const Tensor& x) {
  Tensor y;
  {
    NoGrad no_grad;
    y = exp(x);
  }
  return record("doubled_exp", y, {x}, [y](const Tensor& g) { return std::vector<Tensor>{g * y * 2.0}; });
}

}  // namespace

TEST_CASE("gradcheck catches a wrong pullback") {
  Generator gen(7);
  Tensor x = randn({3, 4}, gen, DType::f64);
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return doubled_exp(in[0]); }, {x});
  INFO(r.describe());
  CHECK_FALSE(r.pass);
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].worst_element >= 0);
  // analytic = 2 numeric everywhere: the normwise relative error is about 1.
  CHECK(r.max_rel_err > 0.5);
  CHECK(r.max_abs_err > 1e-3);
  CHECK(std::abs(r.inputs[0].analytic - 2 * r.inputs[0].numeric) < 1e-6 * std::abs(r.inputs[0].analytic) + 1e-9);
  CHECK(r.describe().find("input 0: max rel") != std::string::npos);
}

TEST_CASE("gradcheck: the correct version of the same op passes") {
  Generator gen(7);
  Tensor x = randn({3, 4}, gen, DType::f64);
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return exp(in[0]); }, {x});
  INFO(r.describe());
  CHECK(r.pass);
  CHECK(r.max_rel_err <= 1e-6);
}

TEST_CASE("gradcheck refuses f32 inputs, naming the input and its dtype") {
  Generator gen(1);
  Tensor a = randn({2, 2}, gen, DType::f64);
  Tensor b = randn({2, 2}, gen, DType::f32);
  auto f = [](const std::vector<Tensor>& in) { return in[0] * cast(in[1], DType::f64); };
  CHECK_THROWS_WITH_AS(gradcheck(f, {a, b}),
                       "[gradcheck] input 1 has dtype f32; gradients are checked in f64 only "
                       "(cast the input with cast(x, DType::f64))",
                       cotan::Error);
}

TEST_CASE("gradcheck passes integer inputs through unchecked") {
  Generator gen(3);
  Tensor x = randn({4, 5}, gen, DType::f64);
  Tensor idx = randint({4, 2}, 0, 5, gen);
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); }, {x, idx});
  INFO(r.describe());
  CHECK(r.pass);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[1].worst_element == -1);
  CHECK(r.inputs[1].max_abs_err == 0);
  CHECK(r.describe().find("input 1: not checked") != std::string::npos);
}

TEST_CASE("gradcheck leaves the caller's inputs untouched") {
  Generator gen(5);
  Tensor x = randn({3, 3}, gen, DType::f64);
  auto before = x.to_vector<double>();
  gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]); }, {x});
  CHECK(x.to_vector<double>() == before);
}

TEST_CASE("gradcheck reports a NaN gradient as a failure") {
  Generator gen(9);
  Tensor x = rand({2, 3}, gen, DType::f64) + 0.5;
  auto f = [](const std::vector<Tensor>& in) {
    Tensor y;
    {
      NoGrad no_grad;
      y = square(in[0]);
    }
    return record("nan_square", y, {in[0]},
                  [](const Tensor& g) { return std::vector<Tensor>{g * std::nan("")}; });
  };
  GradcheckResult r = gradcheck(f, {x});
  CHECK_FALSE(r.pass);
  CHECK(std::isinf(r.max_abs_err));
}
