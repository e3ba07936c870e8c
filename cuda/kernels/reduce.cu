// Reduction launchers (kernels and layouts in reduce.cuh). Axes, dtype and extent are
// checked by Backend::reduce (tensor/op_checks.cpp).
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/reduce.cuh"

namespace cotan::COTAN_KERNELS {
namespace {

constexpr int64_t kShortRow = 1024;     // rows (or chunks) up to this long: one warp per output
constexpr int64_t kRowChunk = 4096;     // positions per pass-1 task of a chunked row
constexpr int64_t kColumnChunk = 1024;  // positions per pass-1 task of a chunked column tile
constexpr int64_t kFewTasks = 64;       // fewer output tasks than this: chunk long reductions
constexpr int64_t kMinColumns = 8;      // narrower stride-1 kept dims are read as rows

struct Dim {
  int64_t size, x_stride, out_stride;
};

// x's dims without those of size 1: kept dims in x's order (out_stride: in the contiguous
// output), reduced dims by decreasing |stride|, so that the fold follows memory order.
struct ReduceDims {
  std::vector<Dim> kept, reduced;
  int64_t outputs = 1, length = 1;
};

ReduceDims split_dims(const Tensor& x, const std::vector<int64_t>& axes) {
  ReduceDims dims;
  Shape kept_shape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) kept_shape.push_back(x.size(d));
  const Strides out_strides = contiguous_strides(kept_shape);
  for (int64_t d = 0, k = 0; d < x.dim(); ++d) {
    const int64_t size = x.size(d), stride = x.strides()[size_t(d)];
    if (std::binary_search(axes.begin(), axes.end(), d)) dims.reduced.push_back({size, stride, 0});
    else dims.kept.push_back({size, stride, out_strides[size_t(k++)]});
  }
  std::erase_if(dims.kept, [](const Dim& d) { return d.size == 1; });
  std::erase_if(dims.reduced, [](const Dim& d) { return d.size == 1; });
  std::stable_sort(dims.reduced.begin(), dims.reduced.end(),
                   [](const Dim& a, const Dim& b) { return std::abs(a.x_stride) > std::abs(b.x_stride); });
  for (const Dim& d : dims.kept) dims.outputs *= d.size;
  for (const Dim& d : dims.reduced) dims.length *= d.size;
  return dims;
}

int64_t x_stride_of(const Dim& d) { return d.x_stride; }
int64_t out_stride_of(const Dim& d) { return d.out_stride; }

// The layout of `dims` with each dim's stride picked by `stride` (one operand), or by `a` and `b`.
template <class F>
StridedLayout<1> layout_1(const std::vector<Dim>& dims, F stride) {
  Shape sizes;
  Strides s;
  for (const Dim& d : dims) sizes.push_back(d.size), s.push_back(stride(d));
  return make_layout<1>(sizes, {&s});
}
template <class A, class B>
StridedLayout<2> layout_2(const std::vector<Dim>& dims, A a, B b) {
  Shape sizes;
  Strides sa, sb;
  for (const Dim& d : dims) sizes.push_back(d.size), sa.push_back(a(d)), sb.push_back(b(d));
  return make_layout<2>(sizes, {&sa, &sb});
}
// A 1-D layout of n elements `stride` apart.
StridedLayout<1> line_layout(int64_t n, int64_t stride) {
  const Shape sizes{n};
  const Strides s{stride};
  return make_layout<1>(sizes, {&s});
}

int64_t chunks_of(int64_t length, int64_t chunk) { return (length + chunk - 1) / chunk; }

// Scratch memory on the target for n partials of type A. Dropping it once the launches that use
// it are queued is safe: work on the target is ordered on one stream (cuda/allocator.hpp).
template <class A>
std::shared_ptr<Storage> partial_buffer(int64_t n) {
  return allocate_storage(size_t(n) * sizeof(A));
}

// ---- rows ----

template <class Q, unsigned Group, class In, class Out>
void launch_rows_as(const RowsPlan& plan, const In* x, Out* out) {
  const LaunchSize size = row_launch<Group>(plan.outputs * plan.chunks);
  simt::launch(reduce_rows_kernel<Q, In, Out, Group>, size.grid, size.block, 0, plan, x, out);
}

template <class Q, class In, class Out>
void launch_rows(const RowsPlan& plan, const In* x, Out* out) {
  if (plan.chunk <= kShortRow) launch_rows_as<Q, kWarpSize>(plan, x, out);
  else launch_rows_as<Q, kRowBlock>(plan, x, out);
}

template <class P>
void reduce_rows(const ReduceDims& dims, const typename P::In* x, typename P::Out* out) {
  using Acc = typename P::Acc;
  RowsPlan plan;
  plan.outputs = dims.outputs;
  plan.length = dims.length;
  plan.kept = layout_1(dims.kept, x_stride_of);
  plan.reduced = layout_1(dims.reduced, x_stride_of);
  if (dims.outputs >= kFewTasks || dims.length < 2 * kRowChunk) {
    plan.chunk = dims.length;
    return launch_rows<P>(plan, x, out);
  }
  // partial[o][c]: chunk c of output o.
  plan.chunk = kRowChunk;
  plan.chunks = chunks_of(dims.length, kRowChunk);
  const auto scratch = partial_buffer<Acc>(plan.outputs * plan.chunks);
  Acc* partial = static_cast<Acc*>(scratch->data);
  static_assert(kRowChunk > kShortRow, "chunks of a row are folded by the block");
  launch_rows_as<PartialPolicy<P>, kRowBlock>(plan, x, partial);
  RowsPlan merge;
  merge.outputs = plan.outputs;
  merge.length = merge.chunk = plan.chunks;
  merge.kept = line_layout(plan.outputs, plan.chunks);
  merge.reduced = line_layout(plan.chunks, 1);
  launch_rows<MergePolicy<P>>(merge, static_cast<const Acc*>(partial), out);
}

// ---- columns ----

// The kept dim read as columns: the innermost one with x stride 1 and enough outputs, when the
// reduced positions are not themselves contiguous. -1: read as rows.
int column_dim(const ReduceDims& dims, const StridedLayout<1>& reduced) {
  if (reduced.strides[0][reduced.ndim - 1] == 1) return -1;
  for (size_t d = dims.kept.size(); d-- > 0;)
    if (dims.kept[d].x_stride == 1 && dims.kept[d].size >= kMinColumns) return int(d);
  return -1;
}

template <class Q, class In, class Out>
void launch_columns(const ColumnsPlan& plan, const In* x, Out* out) {
  const int64_t tasks = plan.outers * chunks_of(plan.width, kColumnTile) * plan.chunks;
  const simt::Dim3 grid{unsigned(std::min(tasks, kMaxBlocks)), 1, 1};
  const simt::Dim3 block{kColumnTile, kColumnSlices, 1};
  simt::launch(reduce_columns_kernel<Q, In, Out>, grid, block, 0, plan, x, out);
}

template <class P>
void reduce_columns(const ReduceDims& dims, size_t column, const typename P::In* x, typename P::Out* out) {
  using Acc = typename P::Acc;
  std::vector<Dim> outer = dims.kept;
  outer.erase(outer.begin() + int64_t(column));
  const Dim& c = dims.kept[column];
  ColumnsPlan plan;
  plan.outers = dims.outputs / c.size;
  plan.width = c.size;
  plan.length = dims.length;
  plan.x_column_step = c.x_stride;
  plan.reduced = layout_1(dims.reduced, x_stride_of);
  const int64_t tiles = chunks_of(c.size, kColumnTile);
  if (plan.outers * tiles >= kFewTasks || dims.length < 2 * kColumnChunk) {
    plan.chunk = dims.length;
    plan.outer = layout_2(outer, x_stride_of, out_stride_of);
    plan.out_column_step = c.out_stride;
    return launch_columns<P>(plan, x, out);
  }
  // partial[o][k][j]: chunk k of column j of outer o.
  plan.chunk = kColumnChunk;
  plan.chunks = chunks_of(dims.length, kColumnChunk);
  const int64_t per_outer = plan.chunks * plan.width;
  Shape outer_sizes;
  for (const Dim& d : outer) outer_sizes.push_back(d.size);
  const Strides outer_partial = contiguous_strides(outer_sizes);
  std::vector<Dim> to_partial = outer, from_partial = outer;  // x -> partial, partial -> out
  for (size_t d = 0; d < outer.size(); ++d) {
    to_partial[d].out_stride = outer_partial[d] * per_outer;
    from_partial[d].x_stride = outer_partial[d] * per_outer;
  }
  plan.outer = layout_2(to_partial, x_stride_of, out_stride_of);
  plan.out_column_step = 1;
  plan.out_chunk_step = plan.width;
  const auto scratch = partial_buffer<Acc>(plan.outers * per_outer);
  Acc* partial = static_cast<Acc*>(scratch->data);
  launch_columns<PartialPolicy<P>>(plan, x, partial);

  ColumnsPlan merge;
  merge.outers = plan.outers;
  merge.width = plan.width;
  merge.length = merge.chunk = plan.chunks;
  merge.outer = layout_2(from_partial, x_stride_of, out_stride_of);
  merge.x_column_step = 1;
  merge.out_column_step = c.out_stride;
  merge.reduced = line_layout(plan.chunks, plan.width);
  launch_columns<MergePolicy<P>>(merge, static_cast<const Acc*>(partial), out);
}

template <class P>
void reduce_with(const ReduceDims& dims, const Tensor& x, const Tensor& out) {
  const auto* in = static_cast<const typename P::In*>(x.data_ptr());
  auto* result = static_cast<typename P::Out*>(out.data_ptr());
  const StridedLayout<1> reduced = layout_1(dims.reduced, x_stride_of);
  const int column = column_dim(dims, reduced);
  if (column >= 0) reduce_columns<P>(dims, size_t(column), in, result);
  else reduce_rows<P>(dims, in, result);
}

}  // namespace

namespace launch {

// axes normalized and sorted, dtype and extent checked (Backend::reduce).
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  check_on_target(op_name(op), x);
  const bool indexed = op == ReduceOp::argmax || op == ReduceOp::argmin;
  Shape shape;
  int64_t length = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d)) {
      shape.push_back(x.size(d));
    } else {
      length *= x.size(d);
      if (keepdim) shape.push_back(1);
    }
  }
  const DType out_dtype = indexed || x.dtype() == DType::boolean ? DType::i64 : x.dtype();
  Tensor out = empty_tensor(shape, out_dtype);
  if (out.numel() == 0) return out;
  if (length == 0) {
    fill(out, 0);
    return out;
  }
  const ReduceDims dims = split_dims(x, axes);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      reduce_with<SumPolicy<bool>>(dims, x, out);
    } else {
      switch (op) {
        case ReduceOp::sum: return reduce_with<SumPolicy<T>>(dims, x, out);
        case ReduceOp::max: return reduce_with<ExtremumPolicy<T, true>>(dims, x, out);
        case ReduceOp::min: return reduce_with<ExtremumPolicy<T, false>>(dims, x, out);
        case ReduceOp::argmax: return reduce_with<ArgPolicy<T, true>>(dims, x, out);
        case ReduceOp::argmin: return reduce_with<ArgPolicy<T, false>>(dims, x, out);
      }
    }
  });
  return out;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
