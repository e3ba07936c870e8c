// Views, copies and joins. Views share storage (as_strided); their pullbacks undo the view.
#include <algorithm>
#include <numeric>
#include <optional>

#include "autograd/rules/common.hpp"

namespace cotan {

using namespace rules;

namespace {

// Strides that let `shape` view the data of (old_shape, old_strides) without a copy, if any
// (numpy's attempt_nocopy_reshape: each run of new dims must map onto a run of old dims that is
// itself contiguous).
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape) {
  if (numel(shape) == 0) return contiguous_strides(shape);
  Shape od;
  Strides os;
  for (size_t i = 0; i < old_shape.size(); ++i)
    if (old_shape[i] != 1) od.push_back(old_shape[i]), os.push_back(old_strides[i]);
  Strides out(shape.size(), 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < shape.size() && oi < od.size()) {
    int64_t np = shape[ni], op = od[oi];
    while (np != op) {
      if (np < op) np *= shape[nj++];
      else op *= od[oj++];
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;
    out[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) out[k - 1] = out[k] * shape[k];
    ni = nj++;
    oi = oj++;
  }
  // Trailing size-1 dims.
  int64_t last = ni > 0 ? out[ni - 1] : 1;
  for (size_t k = ni; k < shape.size(); ++k) out[k] = last;
  return out;
}

Shape resolve_shape(const Tensor& x, const Shape& shape) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) fail("reshape", "shape ", to_string(shape), " has more than one -1");
      infer = int64_t(i);
    } else if (out[i] < 0) {
      fail("reshape", "shape ", to_string(shape), " has a negative dimension");
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      fail("reshape", "cannot reshape ", to_string(x.shape()), " (", x.numel(), " elements) to ", to_string(shape));
    out[size_t(infer)] = x.numel() / known;
  }
  if (numel(out) != x.numel())
    fail("reshape", "cannot reshape ", to_string(x.shape()), " (", x.numel(), " elements) to ", to_string(shape));
  return out;
}

Tensor copy_of(const Tensor& x, DType dtype) {
  Tensor y = Tensor::empty(x.shape(), dtype, x.device());
  backend_of(x).assign(y, x);
  return y;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined("reshape", x);
  Shape target = resolve_shape(x, shape);
  if (target == x.shape()) return x;
  auto strides = view_strides(x.shape(), x.strides(), target);
  Tensor y = strides ? x.as_strided(target, *strides, x.offset()) : reshape(contiguous(x.detach()), target).detach();
  return record("reshape", y, {x}, [shape = x.shape()](const Tensor& g) { return std::vector{reshape(g, shape)}; });
}

Tensor flatten(const Tensor& x, int64_t start_axis, int64_t end_axis) {
  check_defined("flatten", x);
  if (x.dim() == 0) return reshape(x, {1});
  int64_t s = normalize_axis(start_axis, x.dim(), "flatten"), e = normalize_axis(end_axis, x.dim(), "flatten");
  if (s > e) fail("flatten", "start axis ", start_axis, " is after end axis ", end_axis);
  Shape out(x.shape().begin(), x.shape().begin() + s);
  out.push_back(-1);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  if (x.numel() == 0) out[size_t(s)] = 0;  // -1 cannot be inferred for empty tensors
  return reshape(x, out);
}

Tensor permute(const Tensor& x, const Axes& order) {
  check_defined("permute", x);
  if (int64_t(order.size()) != x.dim())
    fail("permute", "order ", to_string(order), " does not have the ", x.dim(), " axes of ", to_string(x.shape()));
  Axes norm(order.size()), inverse(order.size());
  std::vector<bool> seen(order.size());
  Shape shape(order.size());
  Strides strides(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t a = normalize_axis(order[i], x.dim(), "permute");
    if (seen[size_t(a)]) fail("permute", "order ", to_string(order), " repeats axis ", a);
    seen[size_t(a)] = true;
    norm[i] = a;
    inverse[size_t(a)] = int64_t(i);
    shape[i] = x.shape()[size_t(a)];
    strides[i] = x.strides()[size_t(a)];
  }
  Tensor y = x.as_strided(shape, strides, x.offset());
  return record("permute", y, {x}, [inverse](const Tensor& g) { return std::vector{permute(g, inverse)}; });
}

Tensor transpose(const Tensor& x, int64_t axis0, int64_t axis1) {
  check_defined("transpose", x);
  int64_t a = normalize_axis(axis0, x.dim(), "transpose"), b = normalize_axis(axis1, x.dim(), "transpose");
  Axes order(size_t(x.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[size_t(a)], order[size_t(b)]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
  check_defined("slice", x);
  int64_t a = normalize_axis(axis, x.dim(), "slice");
  if (step <= 0) fail("slice", "step must be positive, got ", step);
  // Python semantics: negative bounds count from the end, then clamp to [0, size].
  int64_t n = x.size(a);
  auto bound = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
  int64_t lo = bound(start), hi = bound(stop);
  int64_t len = hi > lo ? (hi - lo + step - 1) / step : 0;
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape[size_t(a)] = len;
  int64_t offset = x.offset() + (len > 0 ? lo * strides[size_t(a)] : 0);
  strides[size_t(a)] *= step;
  Tensor y = x.as_strided(shape, strides, offset);
  // The backward pass writes the cotangent into its place (Node::region); the pullback, which
  // pads it with zeros, says the same.
  Tensor out = record("slice", y, {x}, [xs = x.shape(), a, lo, hi, step](const Tensor& g) {
    Tensor z = zeros(xs, g.dtype(), g.device());
    backend_of(z).assign(slice(z, a, lo, hi, step), g);
    return std::vector{z};
  });
  if (out.tracked()) out.node()->region = SliceRegion{a, lo, hi, step};
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  check_defined("broadcast_to", x);
  if (x.shape() == shape) return x;
  size_t n = shape.size(), k = size_t(x.dim());
  if (k > n) fail("broadcast_to", "cannot broadcast ", to_string(x.shape()), " to ", to_string(shape));
  Strides strides(n, 0);
  for (size_t i = 0; i < k; ++i) {
    int64_t from = x.shape()[i], to = shape[n - k + i];
    if (from == to) strides[n - k + i] = x.strides()[i];
    else if (from != 1) fail("broadcast_to", "cannot broadcast ", to_string(x.shape()), " to ", to_string(shape));
  }
  Tensor y = x.as_strided(shape, strides, x.offset());
  return record("broadcast_to", y, {x}, [xs = x.shape()](const Tensor& g) { return std::vector{sum_to(g, xs)}; });
}

Tensor expand(const Tensor& x, const Shape& shape) { return broadcast_to(x, shape); }

Tensor squeeze(const Tensor& x, int64_t axis) {
  check_defined("squeeze", x);
  int64_t a = normalize_axis(axis, x.dim(), "squeeze");
  if (x.size(a) != 1) fail("squeeze", "axis ", axis, " has size ", x.size(a), ", not 1");
  Shape shape = x.shape();
  shape.erase(shape.begin() + a);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x) {
  check_defined("squeeze", x);
  Shape shape;
  for (int64_t d : x.shape())
    if (d != 1) shape.push_back(d);
  return reshape(x, shape);
}

Tensor unsqueeze(const Tensor& x, int64_t axis) {
  check_defined("unsqueeze", x);
  int64_t a = normalize_axis(axis, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + a, 1);
  return reshape(x, shape);
}

Tensor contiguous(const Tensor& x) {
  check_defined("contiguous", x);
  if (x.is_contiguous()) return x;
  return record("contiguous", copy_of(x, x.dtype()), {x}, [](const Tensor& g) { return std::vector{g}; });
}

Tensor clone(const Tensor& x) {
  check_defined("clone", x);
  return record("clone", copy_of(x, x.dtype()), {x}, [](const Tensor& g) { return std::vector{g}; });
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) fail("concat", "needs at least one tensor");
  for (const Tensor& x : xs) check_defined("concat", x);
  const Tensor& first = xs[0];
  int64_t a = normalize_axis(axis, first.dim(), "concat");
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_same_device("concat", first, x);
    check_same_dtype("concat", first, x);
    bool ok = x.dim() == first.dim();
    for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == a || x.size(d) == first.size(d);
    if (!ok)
      fail("concat", "input ", i, " of shape ", to_string(x.shape()), " does not match input 0 of shape ",
           to_string(first.shape()), " outside axis ", a);
    total += x.size(a);
  }
  Shape shape = first.shape();
  shape[size_t(a)] = total;
  std::vector<int64_t> bounds{0};  // input i fills [bounds[i], bounds[i + 1]) along the axis
  for (const Tensor& x : xs) bounds.push_back(bounds.back() + x.size(a));
  // Inputs that already lie side by side, as the slices of one contiguous tensor (weights laid
  // out by nn::adjoin): that tensor, viewed. Else a fresh tensor, each input copied into place.
  std::vector<std::pair<int64_t, Tensor>> starts;
  for (size_t i = 0; i < xs.size(); ++i) starts.emplace_back(bounds[i], xs[i]);
  Tensor y = whole_in_place(starts, a, shape);
  if (!y.defined()) {
    y = Tensor::empty(shape, first.dtype(), first.device());
    for (size_t i = 0; i < xs.size(); ++i) backend_of(y).assign(slice(y, a, bounds[i], bounds[i + 1]), xs[i]);
  }
  return record("concat", y, xs, [a, bounds](const Tensor& g) {
    std::vector<Tensor> parts;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) parts.push_back(slice(g, a, bounds[i], bounds[i + 1]));
    return parts;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) fail("stack", "needs at least one tensor");
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i].shape() != xs[0].shape())
      fail("stack", "input ", i, " of shape ", to_string(xs[i].shape()), " does not match input 0 of shape ",
           to_string(xs[0].shape()));
  int64_t a = normalize_axis(axis, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& x : xs) parts.push_back(unsqueeze(x, a));
  return concat(parts, a);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  check_defined("split", x);
  int64_t a = normalize_axis(axis, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "negative size in ", to_string(sizes));
    total += s;
  }
  if (total != x.size(a))
    fail("split", "sizes ", to_string(sizes), " add up to ", total, ", not the ", x.size(a), " of axis ", a);
  std::vector<Tensor> out;
  for (int64_t at = 0; int64_t s : sizes) {
    out.push_back(slice(x, a, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) {
  check_defined("chunk", x);
  if (chunks <= 0) fail("chunk", "needs a positive number of chunks, got ", chunks);
  int64_t a = normalize_axis(axis, x.dim(), "chunk");
  int64_t n = x.size(a), each = (n + chunks - 1) / chunks;
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += each) sizes.push_back(std::min(each, n - at));
  return split(x, sizes, a);
}

Tensor cast(const Tensor& x, DType dtype) {
  check_defined("cast", x);
  if (x.dtype() == dtype) return x;
  Tensor y = copy_of(x, dtype);
  if (!is_floating(x.dtype()) || !is_floating(dtype)) return y;
  return record("cast", y, {x}, [from = x.dtype()](const Tensor& g) { return std::vector{cast(g, from)}; });
}

Tensor to(const Tensor& x, Device device) {
  check_defined("to", x);
  if (x.device() == device) return x;
  // The non-CPU side's backend moves the bytes (host <-> device).
  Backend& mover = backend(device.is_cpu() ? x.device() : device);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device);
  mover.assign(y, x);
  return record("to", y, {x}, [from = x.device()](const Tensor& g) { return std::vector{to(g, from)}; });
}

}  // namespace cotan
