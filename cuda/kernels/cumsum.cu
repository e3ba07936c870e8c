// Cumulative sum launchers (kernels in cumsum.cuh). The axis is normalized by
// Backend::cumsum; the input is read in place with any strides.
#include "cuda/kernels/cumsum.cuh"
#include "cuda/kernels/launch.hpp"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr int64_t kShortLine = 256;  // lines up to this long: one warp per line

template <class T>
void cumsum_typed(const Tensor& x, int64_t axis, bool reverse, const Tensor& out) {
  using Out = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
  const AxisLines lines = lines_along(x, axis, true);
  const T* in = static_cast<const T*>(x.data_ptr());
  Out* y = static_cast<Out*>(out.data_ptr());
  if (lines.columns) {
    const LaunchSize size = grid_stride_launch(lines.count);
    simt::launch(cumsum_columns_kernel<T, Out>, size.grid, size.block, 0, lines, reverse, in, y);
  } else if (lines.length <= kShortLine) {
    const LaunchSize size = row_launch<kWarpSize>(lines.count);
    simt::launch(cumsum_rows_kernel<T, Out, kWarpSize>, size.grid, size.block, 0, lines, reverse, in, y);
  } else {
    const LaunchSize size = row_launch<kRowBlock>(lines.count);
    simt::launch(cumsum_rows_kernel<T, Out, kRowBlock>, size.grid, size.block, 0, lines, reverse, in, y);
  }
}

}  // namespace

namespace launch {

Tensor cumsum(const Tensor& x, int64_t axis, bool reverse) {
  check_on_target("cumsum", x);  // axis normalized by Backend::cumsum
  const DType out_dtype = x.dtype() == DType::boolean ? DType::i64 : x.dtype();
  Tensor out = empty_tensor(x.shape(), out_dtype);
  if (out.numel() == 0) return out;
  dispatch_dtype(x.dtype(), [&](auto tag) { cumsum_typed<decltype(tag)>(x, axis, reverse, out); });
  return out;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
