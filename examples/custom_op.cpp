// An op of your own with its own pullback: log(cosh(x)), the smooth L1 loss of robust
// regression. The composed form log(cosh(x)) overflows for |x| > 710 and loses the gradient
// long before; the op computes |x| + softplus(-2|x|) - log 2 instead, and its pullback is
// g tanh(x), written with ordinary ops, which the engine differentiates again if asked.
// gradcheck compares the pullback with central differences in f64.
#include <cmath>
#include <iostream>

#include "autograd/autograd.hpp"
#include "autograd/gradcheck.hpp"
#include "tensor/ops.hpp"

using namespace cotan;

// y = log cosh(x), elementwise. record() puts the node on the tape when x is tracked: its
// pullback maps the cotangent of y to one cotangent per input.
Tensor log_cosh(const Tensor& x) {
  Tensor y;
  {
    NoGrad raw;  // the forward value only; the gradient comes from the pullback below
    const Tensor a = abs(x);
    y = a + softplus(-2.0 * a) - std::log(2.0);
  }
  return record("log_cosh", y, {x}, [x](const Tensor& g) { return std::vector<Tensor>{g * tanh(x)}; });
}

int main() {
  Generator gen(11);
  const Tensor x = 3.0 * randn({6, 5}, gen, DType::f64);
  const Tensor target = randn({6, 5}, gen, DType::f64);

  // The mean log-cosh loss of a prediction x against a target: the op inside a larger function.
  const Function loss = [&](const std::vector<Tensor>& in) { return mean(log_cosh(in[0] - target)); };
  const GradcheckResult check = gradcheck(loss, {x});
  std::cout << (check.pass ? "PASS " : "FAIL ") << check.describe() << "\n";

  // Far out, where the composed form overflows, the op stays finite with gradient sign(x) / n.
  const Tensor far = from_vector(std::vector<double>{-1000.0, 800.0}, {2});
  auto [value, grads] = value_and_grad([](const std::vector<Tensor>& in) { return mean(log_cosh(in[0])); }, {far});
  const std::vector<double> g = grads[0].to_vector<double>();
  const bool finite = std::abs(value.item<double>() - (900.0 - std::log(2.0))) < 1e-9 && g[0] == -0.5 && g[1] == 0.5;
  std::cout << "log_cosh at -1000 and 800: mean " << value.item<double>() << ", gradient " << g[0] << ", " << g[1] << "\n";
  return check.pass && finite ? 0 : 1;
}
