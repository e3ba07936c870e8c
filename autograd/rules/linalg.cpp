// Matrix products: the one primitive that calls a BLAS.
#include "autograd/rules/common.hpp"

namespace cotan {

using namespace rules;

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined("matmul", a);
  check_defined("matmul", b);
  check_same_device("matmul", a, b);
  check_same_dtype("matmul", a, b);
  check_floating("matmul", a);
  if (a.dim() == 0 || b.dim() == 0)
    fail("matmul", "shapes ", to_string(a.shape()), " and ", to_string(b.shape()), " must have at least one dim");
  // numpy semantics for vectors: [K] is a row on the left, a column on the right.
  Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor y = b.dim() == 1 ? unsqueeze(b, -1) : b;
  int64_t m = x.size(-2), k = x.size(-1), n = y.size(-1);
  if (y.size(-2) != k) fail("matmul", "shapes ", to_string(a.shape()), " and ", to_string(b.shape()), " do not match");

  // [..., M, K] @ [K, N], a linear layer on a batch: one [rows, K] @ [K, N] product over all
  // the rows, rather than one per batch entry against a broadcast weight. Each output element is
  // the same sum; the weight's gradient becomes one product over every row (X^T G with K = rows)
  // instead of a batch of products summed by the broadcast's backward.
  if (y.dim() == 2 && x.dim() > 2) {
    Shape out_shape = x.shape();
    out_shape.back() = n;
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
    Tensor out = reshape(matmul(reshape(x, {rows, k}), y), out_shape);
    return b.dim() == 1 ? squeeze(out, -1) : out;  // a has more than one dim here
  }

  Shape xb(x.shape().begin(), x.shape().end() - 2), yb(y.shape().begin(), y.shape().end() - 2);
  Shape batch = broadcast_shapes(xb, yb, "matmul");
  Shape xs = batch, ys = batch;
  xs.insert(xs.end(), {m, k});
  ys.insert(ys.end(), {k, n});
  x = broadcast_to(x, xs);
  y = broadcast_to(y, ys);

  // [.., M, K] @ [.., K, N]: dX = G Y^T (M x N * N x K), dY = X^T G (K x M * M x N). A column-major
  // Y (the W^T of x W^T) gets dY in its own layout, as (G^T X)^T: the same products summed in the
  // same order, so W's gradient comes out contiguous rather than as a transposed view that every
  // later pass over it (the norm, the update) would have to copy. The two products run side by
  // side (concurrently): a layer's are too small to keep the threads busy to their ends alone.
  Tensor out = record("matmul", backend_of(x).matmul(x, y), {x, y}, [x = x.detach(), y = y.detach()](const Tensor& g) {
    const bool column_major = y.size(-1) > 1 && y.size(-2) > 1 && y.strides().back() != 1 && y.strides().end()[-2] == 1;
    Tensor dx, dy;
    concurrently(g.device(), [&] { dx = matmul(g, transpose(y)); },
                 [&] { dy = column_major ? transpose(matmul(transpose(g), x)) : matmul(transpose(x), g); });
    return std::vector{dx, dy};
  });
  if (a.dim() == 1) out = squeeze(out, -2);
  if (b.dim() == 1) out = squeeze(out, -1);
  return out;
}

}  // namespace cotan
