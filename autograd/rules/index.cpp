// Gathers and scatters. Indices get no gradient; each op's pullback is its transpose.
#include "autograd/rules/common.hpp"

namespace cotan {

using namespace rules;

namespace {

void check_gather_shapes(const char* op, const Tensor& x, int64_t axis, const Tensor& index) {
  if (index.dim() != x.dim())
    fail(op, "index of shape ", to_string(index.shape()), " must have the ", x.dim(), " dims of ",
         to_string(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != axis && index.size(d) > x.size(d))
      fail(op, "index of shape ", to_string(index.shape()), " is larger than ", to_string(x.shape()),
           " outside axis ", axis);
}

void check_select_shapes(const char* op, const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  if (index.dim() != 1) fail(op, "index must be 1-D, got shape ", to_string(index.shape()));
  Shape expected = base.shape();
  expected[size_t(axis)] = index.size(0);
  if (src.shape() != expected)
    fail(op, "source of shape ", to_string(src.shape()), " does not match ", to_string(expected));
}

}  // namespace

Tensor gather(const Tensor& x, int64_t axis, const Tensor& index) {
  check_defined("gather", x);
  check_index("gather", index);
  check_same_device("gather", x, index);
  int64_t a = normalize_axis(axis, x.dim(), "gather");
  check_gather_shapes("gather", x, a, index);
  Tensor idx = index.detach();
  return record("gather", backend_of(x).gather(x, a, idx), {x}, [shape = x.shape(), a, idx](const Tensor& g) {
    return std::vector{scatter_add(zeros(shape, g.dtype(), g.device()), a, idx, g)};
  });
}

Tensor scatter_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add", base);
  check_index("scatter_add", index);
  check_same_device("scatter_add", base, index);
  check_same_device("scatter_add", base, src);
  check_same_dtype("scatter_add", base, src);
  int64_t a = normalize_axis(axis, base.dim(), "scatter_add");
  check_gather_shapes("scatter_add", base, a, index);
  if (src.shape() != index.shape())
    fail("scatter_add", "source of shape ", to_string(src.shape()), " does not match index ", to_string(index.shape()));
  Tensor idx = index.detach();
  return record("scatter_add", backend_of(base).scatter_add(base, a, idx, src), {base, src},
                [a, idx](const Tensor& g) { return std::vector{g, gather(g, a, idx)}; });
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  check_defined("index_select", x);
  check_index("index_select", index);
  check_same_device("index_select", x, index);
  int64_t a = normalize_axis(axis, x.dim(), "index_select");
  if (index.dim() != 1) fail("index_select", "index must be 1-D, got shape ", to_string(index.shape()));
  Tensor idx = index.detach();
  return record("index_select", backend_of(x).index_select(x, a, idx), {x}, [shape = x.shape(), a, idx](const Tensor& g) {
    return std::vector{index_add(zeros(shape, g.dtype(), g.device()), a, idx, g)};
  });
}

Tensor index_add(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  check_defined("index_add", base);
  check_index("index_add", index);
  check_same_device("index_add", base, index);
  check_same_device("index_add", base, src);
  check_same_dtype("index_add", base, src);
  int64_t a = normalize_axis(axis, base.dim(), "index_add");
  check_select_shapes("index_add", base, a, index, src);
  Tensor idx = index.detach();
  return record("index_add", backend_of(base).index_add(base, a, idx, src), {base, src},
                [a, idx](const Tensor& g) { return std::vector{g, index_select(g, a, idx)}; });
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_defined("embedding", weight);
  if (weight.dim() != 2) fail("embedding", "weight must be [vocab, dim], got ", to_string(weight.shape()));
  check_index("embedding", ids);
  Shape out = ids.shape();
  out.push_back(weight.size(1));
  return reshape(index_select(weight, 0, reshape(ids, {-1})), out);
}

}  // namespace cotan
