// The matrix products a workload runs, recorded while a ProductLog is open: shape, how each
// operand lies in memory, dtype and device, as Backend::matmul and Backend::matmul_accumulate
// receive them (tensor/op_checks.cpp), on any device and from any thread. `cotan bench matmul
// --step` times a training step's own products this way instead of chosen sizes. With no log
// open, a product pays one atomic load.
//
//   ProductLog log;
//   train_step(...);
//   for (const ProductShape& p : log.products()) ...
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "tensor/shape.hpp"  // operand_layout

namespace cotan {

class Tensor;

// One product: C [batch..., m, n] (+)= A [batch..., m, k] B [batch..., k, n].
struct ProductShape {
  int64_t batch = 1;  // the product of the batch dims
  int64_t m = 0, n = 0, k = 0;
  char a_layout = 'n', b_layout = 'n';  // operand_layout of A's and B's last two dims
  bool accumulate = false;              // C += A B (matmul_accumulate) rather than a new C
  DType dtype = DType::f32;
  Device device;

  double flops() const { return 2.0 * double(batch) * double(m) * double(n) * double(k); }
  bool operator==(const ProductShape&) const = default;
};

// Records every product while it lives. One log at a time: a second, while one is open, throws.
class ProductLog {
 public:
  ProductLog();
  ~ProductLog();
  ProductLog(const ProductLog&) = delete;
  ProductLog& operator=(const ProductLog&) = delete;

  // The products so far, in the order they were noted (products on different threads at the
  // same time in either order).
  std::vector<ProductShape> products() const;

  // Called by the Backend's matmul primitives, after their checks: notes the product of a and b
  // when a log is open.
  static void note(const Tensor& a, const Tensor& b, bool accumulate);

 private:
  std::vector<ProductShape> products_;  // guarded by product_log.cpp's lock
};

}  // namespace cotan
