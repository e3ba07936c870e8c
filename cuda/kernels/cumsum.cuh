// Cumulative sums along one axis, forward (out[i] = x[0] + ... + x[i]) or reverse (out[i] =
// x[i] + ... + x[n-1]). As on the CPU backend: floating types accumulate in f64, integers and
// bool in i64 (bool sums to i64, i32 wraps); every output is rounded from the accumulator once.
//
// Positions are counted in scan order: position p is element p forward, n - 1 - p in reverse.
// Rows kernel: a group (a warp for short lines, else the block) owns a line and scans it in
// chunks of Group positions, one per thread: a warp scan (shfl_up), then the warps' totals in
// order, then the carry of the chunks before. Columns kernel (neighbouring lines contiguous,
// the axis not innermost): one thread per line adds up sequentially, each step of a warp
// reading 32 neighbouring elements.
#pragma once

#include "cuda/kernels/row_group.cuh"

namespace cotan::COTAN_KERNELS {

// Element index of scan position p.
SIMT_DEVICE int64_t scan_index(int64_t p, int64_t length, bool reverse) { return reverse ? length - 1 - p : p; }

template <class T, class Out, unsigned Group>
SIMT_GLOBAL void cumsum_rows_kernel(AxisLines lines, bool reverse, const T* x, Out* out) {
  using Acc = SumAcc<T>;
  using G = RowGroup<Group>;
  const int64_t length = lines.length;
  for (int64_t n = G::first_row(); n < lines.count; n += G::row_stride()) {
    int64_t at[2];
    lines.others.offsets(n, at);
    Acc carry = Acc(0);  // the sum of the chunks before
    for (int64_t chunk = 0; chunk < length; chunk += Group) {
      const int64_t p = chunk + G::rank();
      const int64_t i = scan_index(p, length, reverse);
      const Acc v = p < length ? Acc(load(x + at[0] + i * lines.step)) : Acc(0);
      Acc total;
      const Acc inclusive = group_inclusive_scan<Group>(v, total);
      if (p < length) out[at[1] + i * lines.out_step] = convert_to<Out>(wrapping_add(carry, inclusive));
      carry = wrapping_add(carry, total);
    }
  }
}

// One thread per line (AxisLines::columns).
template <class T, class Out>
SIMT_GLOBAL void cumsum_columns_kernel(AxisLines lines, bool reverse, const T* x, Out* out) {
  using Acc = SumAcc<T>;
  for (int64_t n = first_index(); n < lines.count; n += index_stride()) {
    int64_t at[2];
    lines.others.offsets(n, at);
    Acc sum = Acc(0);
    for (int64_t p = 0; p < lines.length; ++p) {
      const int64_t i = scan_index(p, lines.length, reverse);
      sum = wrapping_add(sum, Acc(load(x + at[0] + i * lines.step)));
      out[at[1] + i * lines.out_step] = convert_to<Out>(sum);
    }
  }
}

}  // namespace cotan::COTAN_KERNELS
