// Elementwise ops: forward through the op table, pullback written with ops, side by side.
#include <cmath>
#include <numbers>

#include "autograd/rules/common.hpp"

namespace cotan {

using namespace rules;

namespace {

Tensor unary_kernel(UnaryOp op, const Tensor& x, double a = 0, double b = 0) {
  check_defined(std::string(op_name(op)).c_str(), x);
  return backend_of(x).unary(op, x, a, b);
}

Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) {
  return backend_of(a).binary(op, a, b);
}

Tensor zero_like_scalar(const Tensor& x) { return scalar_like(x, 0.0); }

}  // namespace

Tensor neg(const Tensor& x) {
  return record("neg", unary_kernel(UnaryOp::neg, x), {x}, [](const Tensor& g) { return std::vector{neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::exp, x);
  return record("exp", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{g * y}; });
}

Tensor log(const Tensor& x) {
  return record("log", unary_kernel(UnaryOp::log, x), {x},
                [x = x.detach()](const Tensor& g) { return std::vector{g / x}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::sqrt, x);
  // d sqrt(x) = 1 / (2 sqrt(x))
  return record("sqrt", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{g / (y * 2.0)}; });
}

Tensor rsqrt(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::rsqrt, x);
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
  return record("rsqrt", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{g * (y * y * y) * -0.5}; });
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::tanh, x);
  return record("tanh", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{g * (1.0 - y * y)}; });
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::sigmoid, x);
  return record("sigmoid", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{g * y * (1.0 - y)}; });
}

Tensor silu(const Tensor& x) {
  // d [x s(x)] = s (1 + x (1 - s))
  return record("silu", unary_kernel(UnaryOp::silu, x), {x}, [x = x.detach()](const Tensor& g) {
    Tensor s = sigmoid(x);
    return std::vector{g * s * (1.0 + x * (1.0 - s))};
  });
}

Tensor relu(const Tensor& x) {
  // The gradient at 0 is 0 (as in PyTorch): the mask is x > 0, not x >= 0.
  return record("relu", unary_kernel(UnaryOp::relu, x), {x}, [x = x.detach()](const Tensor& g) {
    return std::vector{where(gt(x, zero_like_scalar(x)), g, zero_like_scalar(g))};
  });
}

Tensor gelu_tanh(const Tensor& x) {
  // y = x/2 (1 + tanh(u)), u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715
  // dy/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2),  t = tanh(u)
  return record("gelu_tanh", unary_kernel(UnaryOp::gelu_tanh, x), {x}, [x = x.detach()](const Tensor& g) {
    constexpr double kC = 0.044715;
    const double k = std::sqrt(2.0 / std::numbers::pi);
    Tensor x2 = x * x;
    Tensor t = tanh((x + x2 * x * kC) * k);
    Tensor dy = (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * k * (1.0 + x2 * (3.0 * kC));
    return std::vector{g * dy};
  });
}

Tensor softplus(const Tensor& x) {
  // d log(1 + e^x) = sigmoid(x)
  return record("softplus", unary_kernel(UnaryOp::softplus, x), {x},
                [x = x.detach()](const Tensor& g) { return std::vector{g * sigmoid(x)}; });
}

Tensor abs(const Tensor& x) {
  return record("abs", unary_kernel(UnaryOp::abs, x), {x},
                [x = x.detach()](const Tensor& g) { return std::vector{g * sign(x)}; });
}

Tensor square(const Tensor& x) {
  return record("square", unary_kernel(UnaryOp::square, x), {x},
                [x = x.detach()](const Tensor& g) { return std::vector{g * x * 2.0}; });
}

Tensor reciprocal(const Tensor& x) {
  Tensor y = unary_kernel(UnaryOp::reciprocal, x);
  return record("reciprocal", y, {x}, [y = y.detach()](const Tensor& g) { return std::vector{-(g * y * y)}; });
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  if (lo > hi) fail("clamp", "lower bound ", lo, " is above upper bound ", hi);
  // Gradient passes where lo <= x <= hi.
  return record("clamp", unary_kernel(UnaryOp::clamp, x, lo, hi), {x}, [x = x.detach(), lo, hi](const Tensor& g) {
    Tensor inside = logical_and(ge(x, scalar_like(x, lo)), le(x, scalar_like(x, hi)));
    return std::vector{where(inside, g, zero_like_scalar(g))};
  });
}

Tensor pow(const Tensor& x, double exponent) {
  return record("pow", unary_kernel(UnaryOp::pow, x, exponent), {x}, [x = x.detach(), exponent](const Tensor& g) {
    return std::vector{g * pow(x, exponent - 1.0) * exponent};
  });
}

Tensor sign(const Tensor& x) { return unary_kernel(UnaryOp::sign, x); }

Tensor logical_not(const Tensor& x) {
  if (x.dtype() != DType::boolean) fail("logical_not", "expects bool, got ", x.dtype());
  return unary_kernel(UnaryOp::logical_not, x);
}

// ---- binary ----

Tensor add(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("add", a, b);
  return record("add", binary_kernel(BinaryOp::add, x, y), {x, y},
                [](const Tensor& g) { return std::vector{g, g}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("sub", a, b);
  return record("sub", binary_kernel(BinaryOp::sub, x, y), {x, y},
                [](const Tensor& g) { return std::vector{g, neg(g)}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("mul", a, b);
  return record("mul", binary_kernel(BinaryOp::mul, x, y), {x, y}, [x = x.detach(), y = y.detach()](const Tensor& g) {
    return std::vector{g * y, g * x};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("div", a, b);
  Tensor q = binary_kernel(BinaryOp::div, x, y);
  // d(x/y) = dx / y - dy x / y^2 = dx / y - dy q / y
  return record("div", q, {x, y}, [y = y.detach(), q = q.detach()](const Tensor& g) {
    Tensor gx = g / y;
    return std::vector{gx, -(gx * q)};
  });
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("maximum", a, b);
  // Ties send the gradient to the first operand.
  return record("maximum", binary_kernel(BinaryOp::maximum, x, y), {x, y},
                [x = x.detach(), y = y.detach()](const Tensor& g) {
                  Tensor first = ge(x, y), zero = zero_like_scalar(g);
                  return std::vector{where(first, g, zero), where(first, zero, g)};
                });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  auto [x, y] = broadcast_pair("minimum", a, b);
  return record("minimum", binary_kernel(BinaryOp::minimum, x, y), {x, y},
                [x = x.detach(), y = y.detach()](const Tensor& g) {
                  Tensor first = le(x, y), zero = zero_like_scalar(g);
                  return std::vector{where(first, g, zero), where(first, zero, g)};
                });
}

#define COTAN_COMPARISON(name)                                  \
  Tensor name(const Tensor& a, const Tensor& b) {               \
    auto [x, y] = broadcast_pair(#name, a, b);                  \
    return binary_kernel(BinaryOp::name, x.detach(), y.detach()); \
  }
COTAN_COMPARISON(eq)
COTAN_COMPARISON(ne)
COTAN_COMPARISON(lt)
COTAN_COMPARISON(le)
COTAN_COMPARISON(gt)
COTAN_COMPARISON(ge)
COTAN_COMPARISON(logical_and)
COTAN_COMPARISON(logical_or)
#undef COTAN_COMPARISON

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond);
  if (cond.dtype() != DType::boolean) fail("where", "condition must be bool, got ", cond.dtype());
  auto [x, y] = broadcast_pair("where", a, b);
  check_same_device("where", cond, x);
  Shape shape = broadcast_shapes(cond.shape(), x.shape(), "where");
  Tensor c = broadcast_to(cond.detach(), shape);
  x = broadcast_to(x, shape);
  y = broadcast_to(y, shape);
  return record("where", backend_of(x).where(c, x, y), {x, y}, [c](const Tensor& g) {
    Tensor zero = zero_like_scalar(g);
    return std::vector{where(c, g, zero), where(c, zero, g)};
  });
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

}  // namespace cotan
