// Reductions, the softmax family and scans.
#include <algorithm>

#include "autograd/rules/common.hpp"

namespace cotan {

using namespace rules;

namespace {

// Broadcasts a reduced cotangent (or value) back over the reduced axes of `shape`.
Tensor unreduce(const Tensor& g, const Shape& shape, const std::vector<int64_t>& axes) {
  return broadcast_to(reshape(g, keepdim_shape(shape, axes)), shape);
}

// Moves `axes` to the end and flattens them into one: for kernels that work along one axis.
Tensor flatten_axes_last(const Tensor& x, const std::vector<int64_t>& axes) {
  Axes order;
  Shape kept;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      order.push_back(i);
      kept.push_back(x.size(i));
    }
  for (int64_t a : axes) order.push_back(a);
  kept.push_back(-1);
  return reshape(permute(x, order), kept);
}

Tensor min_or_max(ReduceOp op, const char* name, const Tensor& x, const Axes& axes, bool keepdim) {
  check_defined(name, x);
  auto ax = normalize_axes(axes, x.dim(), name);
  for (int64_t a : ax)
    if (x.size(a) == 0) fail(name, "cannot reduce an empty axis ", a, " of shape ", to_string(x.shape()));
  Tensor y = backend_of(x).reduce(op, x, ax, keepdim);
  // Ties share the cotangent equally.
  return record(name, y, {x}, [x = x.detach(), y = y.detach(), ax](const Tensor& g) {
    Tensor hit = cast(eq(x, unreduce(y, x.shape(), ax)), x.dtype());
    Tensor count = sum(hit, ax, true);
    return std::vector{hit * unreduce(g, x.shape(), ax) / broadcast_to(count, x.shape())};
  });
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim) {
  check_defined("sum", x);
  auto ax = normalize_axes(axes, x.dim(), "sum");
  Tensor y = backend_of(x).reduce(ReduceOp::sum, x, ax, keepdim);
  return record("sum", y, {x}, [shape = x.shape(), ax](const Tensor& g) { return std::vector{unreduce(g, shape, ax)}; });
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdim) {
  check_defined("mean", x);
  check_floating("mean", x);
  auto ax = normalize_axes(axes, x.dim(), "mean");
  int64_t n = 1;
  for (int64_t a : ax) n *= x.size(a);
  if (n == 0) fail("mean", "mean over an empty axis of shape ", to_string(x.shape()));
  return sum(x, ax, keepdim) * (1.0 / double(n));
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdim) { return min_or_max(ReduceOp::max, "max", x, axes, keepdim); }
Tensor min(const Tensor& x, const Axes& axes, bool keepdim) { return min_or_max(ReduceOp::min, "min", x, axes, keepdim); }

Tensor var(const Tensor& x, const Axes& axes, bool keepdim, int64_t correction) {
  check_defined("var", x);
  check_floating("var", x);
  auto ax = normalize_axes(axes, x.dim(), "var");
  int64_t n = 1;
  for (int64_t a : ax) n *= x.size(a);
  if (n - correction <= 0) fail("var", "needs more than ", correction, " elements, got ", n);
  Tensor d = x - mean(x, ax, true);
  return sum(d * d, ax, keepdim) * (1.0 / double(n - correction));
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  check_defined("argmax", x);
  int64_t a = normalize_axis(axis, x.dim(), "argmax");
  if (x.size(a) == 0) fail("argmax", "cannot reduce an empty axis ", a);
  return backend_of(x).reduce(ReduceOp::argmax, x.detach(), {a}, keepdim);
}

Tensor argmin(const Tensor& x, int64_t axis, bool keepdim) {
  check_defined("argmin", x);
  int64_t a = normalize_axis(axis, x.dim(), "argmin");
  if (x.size(a) == 0) fail("argmin", "cannot reduce an empty axis ", a);
  return backend_of(x).reduce(ReduceOp::argmin, x.detach(), {a}, keepdim);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (shape.size() > size_t(x.dim()))
    fail("sum_to", "cannot sum ", to_string(x.shape()), " down to ", to_string(shape));
  size_t lead = size_t(x.dim()) - shape.size();
  Axes axes;
  for (size_t i = 0; i < size_t(x.dim()); ++i) {
    if (i < lead) axes.push_back(int64_t(i));
    else if (shape[i - lead] == 1 && x.shape()[i] != 1) axes.push_back(int64_t(i));
    else if (shape[i - lead] != x.shape()[i])
      fail("sum_to", "cannot sum ", to_string(x.shape()), " down to ", to_string(shape));
  }
  return reshape(sum(x, axes, true), shape);
}

Tensor softmax(const Tensor& x, int64_t axis) {
  check_defined("softmax", x);
  check_floating("softmax", x);
  int64_t a = normalize_axis(axis, x.dim(), "softmax");
  Tensor y = backend_of(x).softmax(x, a);
  // dx = y (g - sum(g y))
  return record("softmax", y, {x}, [y = y.detach(), a](const Tensor& g) {
    Tensor gy = g * y;
    return std::vector{gy - y * sum(gy, {a}, true)};
  });
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  check_defined("log_softmax", x);
  check_floating("log_softmax", x);
  int64_t a = normalize_axis(axis, x.dim(), "log_softmax");
  Tensor y = backend_of(x).log_softmax(x, a);
  // dx = g - softmax(x) sum(g)
  return record("log_softmax", y, {x},
                [y = y.detach(), a](const Tensor& g) { return std::vector{g - exp(y) * sum(g, {a}, true)}; });
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdim) {
  check_defined("logsumexp", x);
  check_floating("logsumexp", x);
  auto ax = normalize_axes(axes, x.dim(), "logsumexp");
  if (ax.empty()) return x;  // a 0-dim tensor: nothing to reduce
  Tensor flat = ax.size() == 1 ? x.detach() : flatten_axes_last(x.detach(), ax);
  int64_t axis = ax.size() == 1 ? ax[0] : flat.dim() - 1;
  Tensor y = backend_of(x).logsumexp(flat, axis);
  if (keepdim) y = reshape(y, keepdim_shape(x.shape(), ax));
  else if (ax.size() > 1) {
    Shape out;
    for (int64_t i = 0; i < x.dim(); ++i)
      if (std::find(ax.begin(), ax.end(), i) == ax.end()) out.push_back(x.size(i));
    y = reshape(y, out);
  }
  // dx = g softmax(x) = g exp(x - y)
  return record("logsumexp", y.detach(), {x}, [x = x.detach(), y = y.detach(), ax](const Tensor& g) {
    return std::vector{unreduce(g, x.shape(), ax) * exp(x - unreduce(y, x.shape(), ax))};
  });
}

Tensor cumsum(const Tensor& x, int64_t axis, bool reverse) {
  check_defined("cumsum", x);
  int64_t a = normalize_axis(axis, x.dim(), "cumsum");
  Tensor y = backend_of(x).cumsum(x, a, reverse);
  // The transpose of a prefix sum is a suffix sum.
  return record("cumsum", y, {x}, [a, reverse](const Tensor& g) { return std::vector{cumsum(g, a, !reverse)}; });
}

}  // namespace cotan
