// The CPU backend's optimizer kernels (tensor/fused_ops.hpp; the ops in train/optim.hpp):
//   adamw_update_all  one pass over every parameter of a step, its gradient and its two moments,
//                     the element math of tensor/adamw_element.hpp (shared with the CUDA
//                     kernel), in one parallel loop over chunks of kChunk elements of all of
//                     them, written in place where the job allows; adamw_update is one job;
//   squared_norm      sum(x^2) in f64, one pass: each chunk of kChunk elements of each tensor
//                     summed over kLanes interleaved f64 lanes, the chunk sums then added in
//                     order, tensor after tensor. Chunks depend only on the sizes: the same
//                     bits with any number of threads.
#include <algorithm>
#include <vector>

#include "tensor/adamw_element.hpp"
#include "tensor/cpu/backend.hpp"
#include "tensor/cpu/parallel.hpp"

namespace cotan::cpu {

namespace {

constexpr int64_t kChunk = int64_t(1) << 14;
constexpr int kLanes = 8;

// One update over [begin, end). Written in place the outputs would be the inputs, element for
// element: no element depends on another, which the compiler cannot see through the pointers.
// This file is compiled without errno for sqrt to set (meson.build), so that the loop runs in
// vector registers; the arithmetic is adamw_element's, the same bits as the CUDA kernel's.
template <class W>
void adamw_range(const W* pp, const W* gp, const W* mp, const W* vp, W* po, W* mo, W* vo,
                 const AdamWScalars<W>& k, int64_t begin, int64_t end) {
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    W pi = pp[i], mi = mp[i], vi = vp[i];
    adamw_element(pi, gp[i], mi, vi, k);
    po[i] = pi;
    mo[i] = mi;
    vo[i] = vi;
  }
}

double wide(double x) { return x; }
double wide(float x) { return x; }
double wide(bf16 x) { return double(float(x)); }

// sum of double(x_i)^2 over n elements, lane k taking i = k mod kLanes, lanes added as a tree.
template <class S>
double squares_f64(const S* x, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const double v = wide(x[i + k]);
      acc[k] += v * v;
    }
  for (int k = 0; i < n; ++i, ++k) {
    const double v = wide(x[i]);
    acc[k] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Where each job's chunks start in the run of all jobs' chunks (one more entry: the total).
template <class Numel>
std::vector<int64_t> chunk_starts(size_t count, Numel&& numel) {
  std::vector<int64_t> starts(count + 1, 0);
  for (size_t i = 0; i < count; ++i) starts[i + 1] = starts[i] + (numel(i) + kChunk - 1) / kChunk;
  return starts;
}

// The job whose chunks hold chunk c.
size_t job_of(const std::vector<int64_t>& starts, int64_t c) {
  return size_t(std::upper_bound(starts.begin(), starts.end(), c) - starts.begin() - 1);
}

}  // namespace

AdamWTensors CpuBackend::adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                                      const AdamWScalars<double>& s) {
  std::vector<AdamWJob> job{{p, g, m, v, s, false}};
  adamw_update_all(job);
  return {job[0].p, job[0].m, job[0].v};
}

void CpuBackend::adamw_update_all(std::vector<AdamWJob>& jobs) {
  struct Out {
    Tensor p, m, v;
  };
  std::vector<Out> outs;
  outs.reserve(jobs.size());
  for (AdamWJob& j : jobs) {
    check(j.p.dtype() == DType::f32 || j.p.dtype() == DType::f64, "adamw", "updates in f32 or f64, got ",
          j.p.dtype());
    for (const Tensor* t : {&j.g, &j.m, &j.v})
      check(t->is_contiguous() && t->shape() == j.p.shape() && t->dtype() == j.p.dtype() && j.p.is_contiguous(),
            "adamw", "expects contiguous tensors of one shape and dtype, got ", t->dtype(), " ",
            to_string(t->shape()), " and ", j.p.dtype(), " ", to_string(j.p.shape()));
    if (j.in_place) outs.push_back({j.p, j.m, j.v});
    else
      outs.push_back({Tensor::empty(j.p.shape(), j.p.dtype()), Tensor::empty(j.p.shape(), j.p.dtype()),
                      Tensor::empty(j.p.shape(), j.p.dtype())});
  }
  const std::vector<int64_t> starts = chunk_starts(jobs.size(), [&](size_t i) { return jobs[i].p.numel(); });
  parallel_for(starts.back(), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t i = job_of(starts, c);
      const AdamWJob& j = jobs[i];
      const int64_t begin = (c - starts[i]) * kChunk, end = std::min(j.p.numel(), begin + kChunk);
      auto run = [&](auto zero) {
        using W = decltype(zero);
        adamw_range(j.p.data<W>(), j.g.data<W>(), j.m.data<W>(), j.v.data<W>(), outs[i].p.data<W>(),
                    outs[i].m.data<W>(), outs[i].v.data<W>(), narrow<W>(j.s), begin, end);
      };
      if (j.p.dtype() == DType::f64) run(0.0);
      else run(0.0f);
    }
  });
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].p = std::move(outs[i].p);
    jobs[i].m = std::move(outs[i].m);
    jobs[i].v = std::move(outs[i].v);
  }
}

Tensor CpuBackend::squared_norm(const std::vector<Tensor>& xs) {
  std::vector<Tensor> flat;
  flat.reserve(xs.size());
  for (const Tensor& x : xs) {
    check(is_floating(x.dtype()), "global_norm", "needs floating tensors, got ", x.dtype(), " ",
          to_string(x.shape()));
    flat.push_back(contiguous_as(x));
  }
  const std::vector<int64_t> starts = chunk_starts(flat.size(), [&](size_t i) { return flat[i].numel(); });
  std::vector<double> sums(size_t(starts.back()), 0.0);
  parallel_for(starts.back(), 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const size_t i = job_of(starts, c);
      const Tensor& x = flat[i];
      const int64_t begin = (c - starts[i]) * kChunk, n = std::min(x.numel(), begin + kChunk) - begin;
      double& out = sums[size_t(c)];
      switch (x.dtype()) {
        case DType::f64: out = squares_f64(x.data<double>() + begin, n); break;
        case DType::f32: out = squares_f64(x.data<float>() + begin, n); break;
        default: out = squares_f64(x.data<bf16>() + begin, n); break;
      }
    }
  });
  double total = 0.0;
  for (double s : sums) total += s;
  Tensor out = Tensor::empty({}, DType::f64);
  fill(out, total);
  return out;
}

}  // namespace cotan::cpu
