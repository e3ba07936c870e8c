// Reduction kernels: sum, max, min, argmax, argmin over any set of axes of a strided tensor.
//
// The launcher (reduce.cu) splits x's dims into kept dims (the outputs, row-major) and reduced
// dims (sorted by stride, outermost first, merged where memory allows), then picks one of:
//   rows:    a group (a warp for short rows, else the block) folds each output's row; threads
//            take positions rank, rank + Group, ... and the group combines them as a tree;
//   columns: a kept dim has stride 1 in x: a block of 32 x 8 threads folds 32 neighbouring
//            outputs, 8 threads per output splitting the positions, so every load is coalesced.
// When there are few outputs and long rows, each row is cut into fixed chunks folded as
// separate tasks into a partial buffer (pass 1), which a second launch folds in chunk order
// (pass 2). Chunk sizes depend only on shapes and no float atomics are used, so a reduction
// gives the same bits on every run of a given shape.
//
// Accumulation follows the CPU backend (tensor/cpu/reduce_policy.hpp): floating sums in f64,
// integer and bool sums in i64 (bool sums to i64, i32 sums wrap); max and min propagate NaN;
// argmax and argmin return the first position of the extremum, a NaN beating any number.
#pragma once

#include "cuda/kernels/row_group.cuh"

namespace cotan::COTAN_KERNELS {

// ---- policies ----
// A policy Q has In (element read), Acc (accumulator), Out (result), identity(),
// step(acc, element, position): folds one element at `position` of the reduced range, and
// combine(a, b): joins two partials. combine is associative and, up to the sign of a zero,
// commutative, since partials meet in a tree. finish(acc) -> Out.

template <class C>
SIMT_HOST_DEVICE C lowest_value() {
  if constexpr (std::is_floating_point_v<C>) return C(-INFINITY);
  else return C(~(std::make_unsigned_t<C>(-1) >> 1));
}
template <class C>
SIMT_HOST_DEVICE C highest_value() {
  if constexpr (std::is_floating_point_v<C>) return C(INFINITY);
  else return C(std::make_unsigned_t<C>(-1) >> 1);
}

template <class T>
struct SumPolicy {
  using In = T;
  using Acc = SumAcc<T>;
  using Out = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
  SIMT_HOST_DEVICE static Acc identity() { return Acc(0); }
  SIMT_HOST_DEVICE static Acc step(Acc a, In v, int64_t) { return wrapping_add(a, Acc(load(&v))); }
  SIMT_HOST_DEVICE static Acc combine(Acc a, Acc b) { return wrapping_add(a, b); }
  SIMT_HOST_DEVICE static Out finish(Acc a) { return convert_to<Out>(a); }
};

// max (kMax) or min; a NaN anywhere makes the result NaN.
template <class T, bool kMax>
struct ExtremumPolicy {
  using In = T;
  using Acc = compute_t<T>;
  using Out = T;
  SIMT_HOST_DEVICE static Acc identity() { return kMax ? lowest_value<Acc>() : highest_value<Acc>(); }
  SIMT_HOST_DEVICE static Acc step(Acc a, In v, int64_t) { return combine(a, load(&v)); }
  SIMT_HOST_DEVICE static Acc combine(Acc a, Acc b) {
    const bool better = kMax ? b > a : b < a;
    return (better || math::is_nan(b)) ? b : a;
  }
  SIMT_HOST_DEVICE static Out finish(Acc a) { return convert_to<Out>(a); }
};

// An extremum and where it is; index -1: nothing folded yet.
template <class C>
struct IndexedValue {
  C value;
  int64_t index;
};

// argmax (kMax) or argmin: the first position of the extremum; the first NaN beats any number.
template <class T, bool kMax>
struct ArgPolicy {
  using In = T;
  using Value = compute_t<T>;
  using Acc = IndexedValue<Value>;
  using Out = int64_t;
  SIMT_HOST_DEVICE static Acc identity() { return Acc{Value(0), -1}; }
  SIMT_HOST_DEVICE static bool beats(Value v, Value best) {
    if (math::is_nan(best)) return false;
    if (math::is_nan(v)) return true;
    return kMax ? v > best : v < best;
  }
  // Positions reach one thread in increasing order: an equal value later does not win.
  SIMT_HOST_DEVICE static Acc step(Acc a, In v, int64_t position) {
    const Value x = load(&v);
    return (a.index < 0 || beats(x, a.value)) ? Acc{x, position} : a;
  }
  // Partials of interleaved positions: on a tie the lower position wins.
  SIMT_HOST_DEVICE static Acc combine(Acc a, Acc b) {
    if (b.index < 0) return a;
    if (a.index < 0 || beats(b.value, a.value)) return b;
    if (beats(a.value, b.value)) return a;
    return b.index < a.index ? b : a;
  }
  SIMT_HOST_DEVICE static Out finish(Acc a) { return a.index; }
};

// Pass 1 of a chunked reduction: P's fold, the partial kept as it is.
template <class P>
struct PartialPolicy : P {
  using Out = typename P::Acc;
  SIMT_HOST_DEVICE static Out finish(typename P::Acc a) { return a; }
};

// Pass 2: folds pass 1's partials (positions: chunk numbers) and finishes as P.
template <class P>
struct MergePolicy : P {
  using In = typename P::Acc;
  SIMT_HOST_DEVICE static typename P::Acc step(typename P::Acc a, In partial, int64_t) {
    return P::combine(a, partial);
  }
};

// ---- rows ----

// Output task t = (o, c) folds positions [c * chunk, min(length, (c + 1) * chunk)) of the row of
// output o and writes out[t] (chunks == 1: out[o], the whole row).
struct RowsPlan {
  int64_t outputs = 0;
  int64_t length = 0;  // positions of the reduced dims per output
  int64_t chunks = 1;
  int64_t chunk = 0;
  StridedLayout<1> kept;     // output o -> x offset of its row
  StridedLayout<1> reduced;  // position -> x offset in a row
};

template <class Q, class In, class Out, unsigned Group>
SIMT_GLOBAL void reduce_rows_kernel(RowsPlan plan, const In* x, Out* out) {
  using G = RowGroup<Group>;
  using Acc = typename Q::Acc;
  const int64_t tasks = plan.outputs * plan.chunks;
  for (int64_t t = G::first_row(); t < tasks; t += G::row_stride()) {
    const int64_t o = t / plan.chunks, first = (t % plan.chunks) * plan.chunk;
    const int64_t end = first + plan.chunk < plan.length ? first + plan.chunk : plan.length;
    int64_t row[1];
    plan.kept.offsets(o, row);
    Acc acc = Q::identity();
    for (int64_t r = first + G::rank(); r < end; r += Group) {
      int64_t at[1];
      plan.reduced.offsets(r, at);
      acc = Q::step(acc, x[row[0] + at[0]], r);
    }
    acc = group_reduce<Group>(acc, [](Acc a, Acc b) { return Q::combine(a, b); });
    if (G::rank() == 0) out[t] = Q::finish(acc);
  }
}

// ---- columns ----

constexpr unsigned kColumnTile = 32;   // neighbouring outputs per block (threadIdx.x)
constexpr unsigned kColumnSlices = 8;  // threads per output (threadIdx.y)

// Outputs [outers, width]: column j of outer o reads x at outer(o)[0] + j * x_column_step and
// its task (o, tile, c) writes out at outer(o)[1] + j * out_column_step + c * out_chunk_step.
// Positions are chunked as in RowsPlan.
struct ColumnsPlan {
  int64_t outers = 0;
  int64_t width = 0;
  int64_t length = 0;
  int64_t chunks = 1;
  int64_t chunk = 0;
  StridedLayout<2> outer;  // o -> x offset, out offset
  int64_t x_column_step = 1;
  int64_t out_column_step = 1;
  int64_t out_chunk_step = 0;
  StridedLayout<1> reduced;  // position -> x offset
};

// Blocks of kColumnTile x kColumnSlices threads, one task (o, tile, c) per block at a time.
template <class Q, class In, class Out>
SIMT_GLOBAL void reduce_columns_kernel(ColumnsPlan plan, const In* x, Out* out) {
  using Acc = typename Q::Acc;
  SIMT_SHARED(Acc, partial, [kColumnSlices][kColumnTile]);
  const unsigned lane = simt::thread_idx().x, slice = simt::thread_idx().y;
  const int64_t tiles = (plan.width + kColumnTile - 1) / kColumnTile;
  const int64_t tasks = plan.outers * tiles * plan.chunks;
  for (int64_t t = simt::block_idx().x; t < tasks; t += simt::grid_dim().x) {
    const int64_t c = t % plan.chunks, tile = (t / plan.chunks) % tiles, o = t / (plan.chunks * tiles);
    const int64_t j = tile * kColumnTile + lane;
    const int64_t first = c * plan.chunk;
    const int64_t end = first + plan.chunk < plan.length ? first + plan.chunk : plan.length;
    int64_t base[2];
    plan.outer.offsets(o, base);
    Acc acc = Q::identity();
    if (j < plan.width) {
      const In* column = x + base[0] + j * plan.x_column_step;
      for (int64_t r = first + slice; r < end; r += kColumnSlices) {
        int64_t at[1];
        plan.reduced.offsets(r, at);
        acc = Q::step(acc, column[at[0]], r);
      }
    }
    partial[slice][lane] = acc;
    simt::sync_threads();
    for (unsigned half = kColumnSlices / 2; half > 0; half /= 2) {
      if (slice < half) partial[slice][lane] = Q::combine(partial[slice][lane], partial[slice + half][lane]);
      simt::sync_threads();
    }
    if (slice == 0 && j < plan.width)
      out[base[1] + j * plan.out_column_step + c * plan.out_chunk_step] = Q::finish(partial[0][lane]);
    simt::sync_threads();  // partial is rewritten by the next task
  }
}

}  // namespace cotan::COTAN_KERNELS
