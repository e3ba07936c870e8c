// Softmax, log_softmax and logsumexp launchers (kernels in softmax.cuh). The axis and dtype are
// checked by Backend (tensor/op_checks.cpp); the input is read in place with any strides.
#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/softmax.cuh"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr int64_t kShortLine = 1024;  // lines up to this long: one warp per line

template <SoftmaxKind Kind>
Tensor softmax_family(const char* name, const Tensor& x, int64_t axis) {
  check_on_target(name, x);  // axis normalized, floating dtype (Backend::softmax and its kin)
  Shape shape = x.shape();
  if (Kind == SoftmaxKind::logsumexp) shape.erase(shape.begin() + axis);
  Tensor out = empty_tensor(shape, x.dtype());
  if (out.numel() == 0) return out;
  if (x.size(axis) == 0) {  // only logsumexp has elements left: the log of an empty sum
    launch::fill(out, -INFINITY);
    return out;
  }
  const AxisLines lines = lines_along(x, axis, Kind != SoftmaxKind::logsumexp);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T* in = static_cast<const T*>(x.data_ptr());
      T* y = static_cast<T*>(out.data_ptr());
      if (lines.columns) {
        const LaunchSize size = grid_stride_launch(lines.count);
        simt::launch(softmax_columns_kernel<Kind, T>, size.grid, size.block, 0, lines, in, y);
      } else if (lines.length <= kShortLine) {
        const LaunchSize size = row_launch<kWarpSize>(lines.count);
        simt::launch(softmax_rows_kernel<Kind, T, kWarpSize>, size.grid, size.block, 0, lines, in, y);
      } else {
        const LaunchSize size = row_launch<kRowBlock>(lines.count);
        simt::launch(softmax_rows_kernel<Kind, T, kRowBlock>, size.grid, size.block, 0, lines, in, y);
      }
    }
  });
  return out;
}

}  // namespace

namespace launch {

Tensor softmax(const Tensor& x, int64_t axis) {
  return softmax_family<SoftmaxKind::softmax>("softmax", x, axis);
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return softmax_family<SoftmaxKind::log_softmax>("log_softmax", x, axis);
}

Tensor logsumexp(const Tensor& x, int64_t axis) {
  return softmax_family<SoftmaxKind::logsumexp>("logsumexp", x, axis);
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
