// Strided walks for the reduce and index kernels. A Walk<N> visits the positions 0..numel-1 of a
// shape in row-major order and tracks one element offset per operand (each operand has its own
// strides, 0 for a broadcast). Its body sees runs along the innermost dimension:
//   body(offsets, run, inner): positions p .. p + run - 1 sit at offsets[k] + j * inner[k].
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace cotan::cpu {

template <int N>
struct Walk {
  using Offsets = std::array<int64_t, N>;

  std::vector<int64_t> sizes;                   // outermost first
  std::array<std::vector<int64_t>, N> strides;  // per operand, in elements

  void add(int64_t size, const Offsets& s) {
    sizes.push_back(size);
    for (int k = 0; k < N; ++k) strides[size_t(k)].push_back(s[size_t(k)]);
  }
  size_t rank() const { return sizes.size(); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int64_t stride(int k, size_t dim) const { return strides[size_t(k)][dim]; }

  // Drops size-1 dims and merges neighbours that every operand steps through as one dim. The
  // row-major order of positions is unchanged.
  void coalesce() {
    Walk out;
    for (size_t d = 0; d < rank(); ++d) {
      if (sizes[d] == 1) continue;
      Offsets s;
      for (int k = 0; k < N; ++k) s[size_t(k)] = strides[size_t(k)][d];
      if (out.rank() > 0) {
        size_t last = out.rank() - 1;
        bool merge = true;
        for (int k = 0; k < N; ++k) merge = merge && out.strides[size_t(k)][last] == s[size_t(k)] * sizes[d];
        if (merge) {
          out.sizes[last] *= sizes[d];
          for (int k = 0; k < N; ++k) out.strides[size_t(k)][last] = s[size_t(k)];
          continue;
        }
      }
      out.add(sizes[d], s);
    }
    *this = std::move(out);
  }

  Offsets offsets(int64_t pos) const {
    Offsets off{};
    for (size_t d = rank(); d-- > 0;) {
      int64_t i = pos % sizes[d];
      pos /= sizes[d];
      for (int k = 0; k < N; ++k) off[size_t(k)] += i * strides[size_t(k)][d];
    }
    return off;
  }

  // Calls body(offsets, run, inner) for runs covering positions [begin, end).
  template <class F>
  void runs(int64_t begin, int64_t end, F&& body) const {
    if (begin >= end) return;
    if (rank() == 0) {
      body(Offsets{}, int64_t(1), Offsets{});
      return;
    }
    const size_t d = rank() - 1;
    std::vector<int64_t> idx(rank());
    Offsets off{};
    int64_t rem = begin;
    for (size_t i = rank(); i-- > 0;) {
      idx[i] = rem % sizes[i];
      rem /= sizes[i];
      for (int k = 0; k < N; ++k) off[size_t(k)] += idx[i] * strides[size_t(k)][i];
    }
    Offsets inner;
    for (int k = 0; k < N; ++k) inner[size_t(k)] = strides[size_t(k)][d];
    for (int64_t pos = begin; pos < end;) {
      int64_t run = std::min(end - pos, sizes[d] - idx[d]);
      body(off, run, inner);
      pos += run;
      if (pos >= end) break;
      // The run ended the innermost dim: rewind it and carry into the outer ones.
      for (int k = 0; k < N; ++k) off[size_t(k)] -= idx[d] * inner[size_t(k)];
      idx[d] = 0;
      for (size_t i = d; i-- > 0;) {
        ++idx[i];
        for (int k = 0; k < N; ++k) off[size_t(k)] += strides[size_t(k)][i];
        if (idx[i] < sizes[i]) break;
        for (int k = 0; k < N; ++k) off[size_t(k)] -= sizes[i] * strides[size_t(k)][i];
        idx[i] = 0;
      }
    }
  }
};

}  // namespace cotan::cpu
