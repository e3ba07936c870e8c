// Memory launchers: the memory target (cuda/kernels/target.hpp), allocate, assign (any strides
// and dtypes; in the CUDA build also host <-> device), fill, arange and random.
#include <cmath>
#include <cstring>
#include <limits>

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/memory.cuh"
#include "tensor/random_bounds.hpp"

#if !COTAN_SIMT_EMULATED
#include "cuda/allocator.hpp"
#include "cuda/runtime.hpp"
#endif

namespace cotan::COTAN_KERNELS {

// ---- the memory target ----

#if COTAN_SIMT_EMULATED

namespace {
Device& served_device() {
  static Device device = Device::cpu();
  return device;
}
}  // namespace

void serve_device(Device device) { served_device() = device; }

Device target_device() { return served_device(); }

// Host memory from the CPU's allocator, reporting the served device.
std::shared_ptr<Storage> allocate_storage(size_t nbytes) {
  std::shared_ptr<Storage> host = cpu_backend().allocate(nbytes);
  if (served_device().is_cpu()) return host;
  void* data = host->data;
  return std::make_shared<Storage>(data, nbytes, served_device(), [host](void*, size_t) mutable { host.reset(); });
}

void copy_bytes(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

#else

Device target_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return Device::cuda(device);
}

std::shared_ptr<Storage> allocate_storage(size_t nbytes) { return allocate_device(nbytes); }

namespace {
bool is_device_memory(const void* p) {
  cudaPointerAttributes attributes{};
  CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  return attributes.type == cudaMemoryTypeDevice;
}
}  // namespace

// A copy that touches host memory waits for the stream: the host may then read the destination,
// or free or overwrite the source, as soon as this returns. Device to device stays asynchronous.
void copy_bytes(void* dst, const void* src, size_t nbytes) {
  if (!nbytes) return;
  const cudaStream_t stream = simt::current_stream();
  CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  if (!is_device_memory(dst) || !is_device_memory(src)) CUDA_CHECK(cudaStreamSynchronize(stream));
}

#endif

Tensor empty_tensor(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) fail("empty", "negative dimension in shape ", to_string(shape));
  return Tensor(allocate_storage(size_t(numel(shape)) * dtype_size(dtype)), shape, contiguous_strides(shape), 0, dtype);
}

void check_on_target(std::string_view op, const Tensor& t) {
  if (t.device() != target_device()) fail(op, "expects tensors on ", target_device(), ", got ", t.device());
}

namespace {

// ---- assign ----

// dst = convert(src), both on the target.
void assign_on_target(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const LaunchSize size = grid_stride_launch(n);
  dispatch_dtype(dst.dtype(), [&](auto d) {
    dispatch_dtype(src.dtype(), [&](auto s) {
      using D = decltype(d);
      using S = decltype(s);
      D* out = static_cast<D*>(dst.data_ptr());
      const S* in = static_cast<const S*>(src.data_ptr());
      if (all_contiguous(dst, src)) {
        if constexpr (std::is_same_v<D, S>) copy_bytes(out, in, dst.nbytes());
        else simt::launch(assign_contiguous_kernel<D, S>, size.grid, size.block, 0, n, out, in);
      } else {
        simt::launch(assign_strided_kernel<D, S>, size.grid, size.block, 0, n, layout_of(dst, src), out, in);
      }
    });
  });
}

// A contiguous host copy of a host tensor (the tensor itself when it already is one).
Tensor contiguous_on_host(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  cpu_backend().assign(out, t);
  return out;
}

// dst on the device, src on the host: the bytes cross in src's dtype and contiguous order, then
// a kernel converts and scatters them when dst needs it.
void assign_from_host(const Tensor& dst, const Tensor& src) {
  const Tensor host = contiguous_on_host(src);
  if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
    copy_bytes(dst.data_ptr(), host.data_ptr(), dst.nbytes());
    return;
  }
  Tensor staged = empty_tensor(src.shape(), src.dtype());
  copy_bytes(staged.data_ptr(), host.data_ptr(), staged.nbytes());
  assign_on_target(dst, staged);
}

// dst on the host, src on the device: converted and packed on the device, then copied.
void assign_to_host(const Tensor& dst, const Tensor& src) {
  Tensor packed = src;
  if (!src.is_contiguous() || src.dtype() != dst.dtype()) {
    packed = empty_tensor(src.shape(), dst.dtype());
    assign_on_target(packed, src);
  }
  if (dst.is_contiguous()) {
    copy_bytes(dst.data_ptr(), packed.data_ptr(), dst.nbytes());
    return;
  }
  Tensor host = Tensor::empty(dst.shape(), dst.dtype(), Device::cpu());
  copy_bytes(host.data_ptr(), packed.data_ptr(), host.nbytes());
  cpu_backend().assign(dst, host);
}

// ---- random ----

template <class T>
void random_typed(RandomOp op, T* out, int64_t n, Generator& gen, double a, double b) {
  // The generator advances by the blocks the draw touches even when n is 0 (no blocks).
  auto draw_of = [&](int per_block) {
    return PhiloxDraw{gen.advance(uint64_t((n + per_block - 1) / per_block)), gen.seed(), n};
  };
  auto run = [&](auto kernel, int per_block, auto... args) {
    const PhiloxDraw draw = draw_of(per_block);
    if (n == 0) return;
    const LaunchSize size = grid_stride_launch((n + per_block - 1) / per_block);
    simt::launch(kernel, size.grid, size.block, 0, draw, args..., out);
  };
  if constexpr (is_floating(dtype_v<T>)) {
    using C = compute_t<T>;
    constexpr bool wide = std::is_same_v<T, double>;
    if (op == RandomOp::uniform) {
      const bool clamp = a < b;
      const UniformParams<T> p{C(a), C(b - a), clamp, clamp ? largest_below<T>(b) : T(0), b};
      run(uniform_kernel<T>, wide ? 2 : 4, p);
      return;
    }
    if (op == RandomOp::normal) {
      run(normal_kernel<T>, 2, C(a), C(b));
      return;
    }
  }
  // Backend::random has ruled out uniform and normal on integers, randint on bool, empty ranges.
  if (op == RandomOp::randint) {
    const int64_t low = int64_t(a), span = int64_t(b) - low;
    run(randint_kernel<T>, 2, low, span);
    return;
  }
  if (op == RandomOp::bernoulli) {
    run(bernoulli_kernel<T>, 4, a);
    return;
  }
  fail("random", "unknown random op ", int(op));
}

}  // namespace

namespace launch {

std::shared_ptr<Storage> allocate(size_t nbytes) { return allocate_storage(nbytes); }

void assign(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;  // shapes checked by Backend::assign
  // Host <-> target (the emulator serving the CPU has no host side: both are "here").
  const bool dst_here = dst.device() == target_device(), src_here = src.device() == target_device();
  if (dst_here != src_here && (dst.device().is_cpu() || src.device().is_cpu())) {
    if (dst_here) assign_from_host(dst, src);
    else assign_to_host(dst, src);
    return;
  }
  check_on_target("assign", dst);
  check_on_target("assign", src);
  assign_on_target(dst, src);
}

void fill(const Tensor& dst, double value) {
  check_on_target("fill", dst);
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const LaunchSize size = grid_stride_launch(n);
    simt::launch(fill_kernel<T>, size.grid, size.block, 0, n, layout_of(dst), static_cast<T*>(dst.data_ptr()),
                 convert<T>(value));
  });
}

Tensor arange(double start, double step, int64_t n, DType dtype) {
  Tensor out = empty_tensor({n}, dtype);  // n >= 0: Backend::arange
  if (n == 0) return out;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const LaunchSize size = grid_stride_launch(n);
    simt::launch(arange_kernel<T>, size.grid, size.block, 0, n, static_cast<T*>(out.data_ptr()), start, step);
  });
  return out;
}

Tensor random(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) {
  Tensor out = empty_tensor(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    random_typed<T>(op, static_cast<T*>(out.data_ptr()), out.numel(), gen, a, b);
  });
  return out;
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
