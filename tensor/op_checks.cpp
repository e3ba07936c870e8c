// The primitives of the Backend interface (tensor/op_table.hpp): the argument checks every backend
// shares, written once with the messages users see, then the backend's kernel. Axes are
// normalized here, so kernels receive them in [0, ndim) and sorted.
#include <algorithm>
#include <string>

#include "tensor/op_table.hpp"
#include "tensor/product_log.hpp"

namespace cotan {

namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  if (index.dtype() != DType::i32 && index.dtype() != DType::i64)
    fail(op, "index must be i32 or i64, got ", index.dtype());
}

// index may be smaller than x outside the axis (gather, scatter_add's base) or anywhere (src: -1).
void check_fits(const char* op, const Tensor& index, const Tensor& x, int64_t axis, const char* what) {
  check(index.dim() == x.dim(), op, "index has ", index.dim(), " dims but the ", what, " has ", x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != axis && index.size(d) > x.size(d))
      fail(op, "index of shape ", to_string(index.shape()), " does not fit the ", what, " of shape ",
           to_string(x.shape()), " at axis ", d);
}

void check_one_dim(const char* op, const Tensor& index) {
  check(index.dim() == 1, op, "index must be 1-D, got shape ", to_string(index.shape()));
}

void check_same_dtype(const char* op, const Tensor& base, const Tensor& src) {
  check(base.dtype() == src.dtype(), op, "base has dtype ", base.dtype(), " but the source has ", src.dtype());
}

void check_softmax_input(const char* op, const Tensor& x) {
  check(is_floating(x.dtype()), op, "expects a floating dtype, got ", x.dtype());
}

}  // namespace

// ---- memory ----

void Backend::assign(const Tensor& dst, const Tensor& src) {
  if (dst.shape() != src.shape())
    fail("assign", "destination shape ", to_string(dst.shape()), " and source shape ", to_string(src.shape()),
         " differ");
  assign_kernel(dst, src);
}

Tensor Backend::arange(double start, double step, int64_t n, DType dtype) {
  check(n >= 0, "arange", "negative length ", n);
  return arange_kernel(start, step, n, dtype);
}

Tensor Backend::random(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) {
  if (op == RandomOp::uniform && !is_floating(dtype)) fail("rand", "expects a floating dtype, got ", dtype);
  if (op == RandomOp::normal && !is_floating(dtype)) fail("randn", "expects a floating dtype, got ", dtype);
  if (op == RandomOp::randint) {
    check(dtype != DType::boolean, "randint", "expects an integer dtype, got bool");
    check(a < b, "randint", "empty range [", a, ", ", b, ")");
  }
  return random_kernel(op, shape, dtype, gen, a, b);
}

// ---- elementwise ----

Tensor Backend::unary(UnaryOp op, const Tensor& x, double a, double b) {
  const DType t = x.dtype();
  if (op != UnaryOp::logical_not) {
    if (!is_floating(t) && !accepts_integers(op)) fail(op_name(op), "expects a floating dtype, got ", t);
    if (t == DType::boolean) fail(op_name(op), "expects a numeric dtype, got bool");
  }
  return unary_kernel(op, x, a, b);
}

Tensor Backend::binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    fail(op_name(op), "operands of shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
         " are not broadcast to one shape");
  if (a.dtype() != b.dtype()) fail(op_name(op), "dtypes ", a.dtype(), " and ", b.dtype(), " differ");
  // add .. div are arithmetic; maximum, minimum and the comparisons take bool.
  if (a.dtype() == DType::boolean && op <= BinaryOp::div) fail(op_name(op), "expects a numeric dtype, got bool");
  return binary_kernel(op, a, b);
}

Tensor Backend::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (cond.dtype() != DType::boolean) fail("where", "condition must be bool, got ", cond.dtype());
  if (cond.shape() != a.shape() || a.shape() != b.shape())
    fail("where", "shapes ", to_string(cond.shape()), ", ", to_string(a.shape()), " and ", to_string(b.shape()),
         " are not broadcast to one shape");
  if (a.dtype() != b.dtype()) fail("where", "dtypes ", a.dtype(), " and ", b.dtype(), " differ");
  return where_kernel(cond, a, b);
}

// ---- reductions ----

Tensor Backend::reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes_in, bool keepdim) {
  const std::string name(op_name(op));
  const bool indexed = op == ReduceOp::argmax || op == ReduceOp::argmin;
  if (indexed && axes_in.size() != 1) fail(name, "expects exactly one axis, got ", axes_in.size());
  const std::vector<int64_t> axes = normalize_axes(axes_in, x.dim(), name.c_str());
  if (x.dtype() == DType::boolean && op != ReduceOp::sum) fail(name, "does not support dtype bool");
  int64_t length = 1;
  for (int64_t d : axes) length *= x.size(d);
  if (length == 0 && op != ReduceOp::sum)
    fail(name, "cannot reduce over zero elements of shape ", to_string(x.shape()));
  return reduce_kernel(op, x, axes, keepdim);
}

Tensor Backend::softmax(const Tensor& x, int64_t axis) {
  axis = normalize_axis(axis, x.dim(), "softmax");
  check_softmax_input("softmax", x);
  return softmax_kernel(x, axis);
}

Tensor Backend::log_softmax(const Tensor& x, int64_t axis) {
  axis = normalize_axis(axis, x.dim(), "log_softmax");
  check_softmax_input("log_softmax", x);
  return log_softmax_kernel(x, axis);
}

Tensor Backend::logsumexp(const Tensor& x, int64_t axis) {
  axis = normalize_axis(axis, x.dim(), "logsumexp");
  check_softmax_input("logsumexp", x);
  return logsumexp_kernel(x, axis);
}

Tensor Backend::cumsum(const Tensor& x, int64_t axis, bool reverse) {
  return cumsum_kernel(x, normalize_axis(axis, x.dim(), "cumsum"), reverse);
}

// ---- matmul ----

Tensor Backend::matmul(const Tensor& a, const Tensor& b) {
  check(a.dtype() == b.dtype(), "matmul", "dtypes ", a.dtype(), " and ", b.dtype(), " differ");
  check(is_floating(a.dtype()), "matmul", "expects a floating dtype, got ", a.dtype());
  check(a.dim() >= 2 && b.dim() >= 2, "matmul", "expects matrices with at least 2 dims, got shapes ",
        to_string(a.shape()), " and ", to_string(b.shape()));
  const int64_t nd = a.dim();
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  check(b.dim() == nd && std::equal(as.begin(), as.end() - 2, bs.begin()) && as[size_t(nd - 1)] == bs[size_t(nd - 2)],
        "matmul", "shapes ", to_string(as), " and ", to_string(bs), " do not match");
  ProductLog::note(a, b, false);
  return matmul_kernel(a, b);
}

void Backend::matmul_accumulate(const Tensor& a, const Tensor& b, const Tensor& c) {
  check(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "matmul_accumulate", "dtypes ", a.dtype(), ", ", b.dtype(),
        " and ", c.dtype(), " differ");
  check(is_floating(a.dtype()), "matmul_accumulate", "expects a floating dtype, got ", a.dtype());
  check(a.device() == c.device() && b.device() == c.device(), "matmul_accumulate", "operands on ", a.device(), ", ",
        b.device(), " and ", c.device());
  check(a.dim() == 2 && b.dim() == 2 && c.dim() == 2 && a.size(1) == b.size(0) && c.size(0) == a.size(0) &&
            c.size(1) == b.size(1),
        "matmul_accumulate", "shapes ", to_string(a.shape()), " x ", to_string(b.shape()), " into ", to_string(c.shape()),
        " do not match");
  check(c.is_contiguous(), "matmul_accumulate", "the sum [", c.size(0), ", ", c.size(1), "] must be contiguous");
  if (c.numel() == 0 || a.size(1) == 0) return;
  ProductLog::note(a, b, true);
  matmul_accumulate_kernel(a, b, c);
}

void Backend::matmul_accumulate_kernel(const Tensor& a, const Tensor& b, const Tensor& c) {
  assign_kernel(c, binary_kernel(BinaryOp::add, c, matmul_kernel(a, b)));
}

// ---- indexing ----

Tensor Backend::gather(const Tensor& x, int64_t axis, const Tensor& index) {
  axis = normalize_axis(axis, x.dim(), "gather");
  check_index_dtype("gather", index);
  check_fits("gather", index, x, axis, "input");
  return gather_kernel(x, axis, index);
}

Tensor Backend::scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  axis = normalize_axis(axis, base.dim(), "scatter_add");
  check_index_dtype("scatter_add", index);
  check_same_dtype("scatter_add", base, src);
  check_fits("scatter_add", index, base, axis, "base");
  check_fits("scatter_add", index, src, -1, "source");
  return scatter_add_kernel(base, axis, index, src);
}

Tensor Backend::index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  axis = normalize_axis(axis, x.dim(), "index_select");
  check_index_dtype("index_select", index);
  check_one_dim("index_select", index);
  return index_select_kernel(x, axis, index);
}

Tensor Backend::index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  axis = normalize_axis(axis, base.dim(), "index_add");
  check_index_dtype("index_add", index);
  check_same_dtype("index_add", base, src);
  check_one_dim("index_add", index);
  const int64_t n = index.size(0);
  Shape expected = base.shape();
  expected[size_t(axis)] = n;
  check(src.shape() == expected, "index_add", "source of shape ", to_string(src.shape()), " does not match ",
        to_string(expected), " (base ", to_string(base.shape()), " with ", n, " indices along axis ", axis, ")");
  return index_add_kernel(base, axis, index, src);
}

}  // namespace cotan
