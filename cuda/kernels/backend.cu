// KernelBackend: the op table (tensor/op_table.hpp), fused ops included, over the kernel
// families, one launcher per op (cuda/kernels/launch.hpp). Built twice (cuda/kernels/target.hpp):
// cotan::cuda::backend() runs on the GPU and serves backend(Device::cuda(i));
// cotan::emu::backend() runs the same kernels in the SIMT emulator on host memory, for tests and
// for cuda:0 under kCudaEmulatorVariable. Which one serves a tensor is its device's backend: no
// flag is consulted here.
#include "cuda/kernels/backend.hpp"
#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/matmul.hpp"
#include "cuda/runtime.hpp"

namespace cotan::COTAN_KERNELS {

class KernelBackend final : public Backend {
 public:
#if COTAN_SIMT_EMULATED
  std::string_view name() const override { return "cuda-emulated"; }
#else
  std::string_view name() const override { return "cuda"; }
#endif

#if !COTAN_SIMT_EMULATED
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(simt::current_stream())); }
  bool tf32() const override { return cotan::cuda::tf32_enabled(); }
  void set_tf32(bool enabled) override { cotan::cuda::set_tf32(enabled); }
#else
  // The emulator takes the mode (a run on emulated cuda:0 behaves as on a GPU) but its matmul is
  // always the f32 kernel.
  bool tf32() const override { return tf32_; }
  void set_tf32(bool enabled) override { tf32_ = enabled; }

 private:
  bool tf32_ = false;

 public:
#endif

  std::shared_ptr<Storage> allocate(size_t nbytes) override { return launch::allocate(nbytes); }
  void assign_kernel(const Tensor& dst, const Tensor& src) override { launch::assign(dst, src); }
  void fill(const Tensor& dst, double value) override { launch::fill(dst, value); }
  Tensor arange_kernel(double start, double step, int64_t n, DType dtype) override {
    return launch::arange(start, step, n, dtype);
  }
  Tensor random_kernel(RandomOp op, const Shape& shape, DType dtype, Generator& gen, double a, double b) override {
    return launch::random(op, shape, dtype, gen, a, b);
  }

  Tensor unary_kernel(UnaryOp op, const Tensor& x, double a, double b) override { return launch::unary(op, x, a, b); }
  Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) override { return launch::binary(op, a, b); }
  Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b) override {
    return launch::where(cond, a, b);
  }

  Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) override {
    return launch::reduce(op, x, axes, keepdim);
  }
  Tensor softmax_kernel(const Tensor& x, int64_t axis) override { return launch::softmax(x, axis); }
  Tensor log_softmax_kernel(const Tensor& x, int64_t axis) override { return launch::log_softmax(x, axis); }
  Tensor logsumexp_kernel(const Tensor& x, int64_t axis) override { return launch::logsumexp(x, axis); }
  Tensor cumsum_kernel(const Tensor& x, int64_t axis, bool reverse) override {
    return launch::cumsum(x, axis, reverse);
  }

  Tensor matmul_kernel(const Tensor& a, const Tensor& b) override { return launch::matmul(a, b); }

  Tensor gather_kernel(const Tensor& x, int64_t axis, const Tensor& index) override {
    return launch::gather(x, axis, index);
  }
  Tensor scatter_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override {
    return launch::scatter_add(base, axis, index, src);
  }
  Tensor index_select_kernel(const Tensor& x, int64_t axis, const Tensor& index) override {
    return launch::index_select(x, axis, index);
  }
  Tensor index_add_kernel(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) override {
    return launch::index_add(base, axis, index, src);
  }

  // f64 cores take the composed attention.
  bool has_attention_kernel(DType dtype) const override { return dtype == DType::f32 || dtype == DType::bf16; }
  AttentionForward attention_forward(const AttentionSpec& core) override { return launch::attention_forward(core); }
  AttentionGrads attention_backward(const AttentionSpec& core, const AttentionForward& saved,
                                    const Tensor& d_out) override {
    return launch::attention_backward(core, saved, d_out);
  }

  // f64 and head dims past the kernel's take the composed cached attention.
  bool has_cached_attention_kernel(DType dtype, int64_t head_dim) const override {
    return (dtype == DType::f32 || dtype == DType::bf16) && head_dim <= launch::kCachedAttentionMaxHeadDim;
  }
  Tensor cached_attention(const CachedAttentionSpec& spec) override { return launch::cached_attention(spec); }

  RmsNormForward rms_norm_forward(const Tensor& x, const Tensor& weight, double eps) override {
    return launch::rms_norm_forward(x, weight, eps);
  }
  RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                 const Tensor& rstd) override {
    return launch::rms_norm_backward(dy, x, weight, rstd);
  }
  Tensor swiglu_forward(const Tensor& g, const Tensor& u) override { return launch::swiglu_forward(g, u); }
  SwigluGrads swiglu_backward(const Tensor& dy, const Tensor& g, const Tensor& u) override {
    return launch::swiglu_backward(dy, g, u);
  }
  Tensor rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin) override {
    return launch::rope_forward(x, cos, sin);
  }
  Tensor rope_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin) override {
    return launch::rope_backward(dy, cos, sin);
  }

  KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& targets,
                       const KdLossConfig& config, bool want_grad, const Tensor& grad_into) override {
    return launch::kd_loss(student, teacher, targets, config, want_grad, grad_into);
  }

  AdamWTensors adamw_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                            const AdamWScalars<double>& s) override {
    return launch::adamw_update(p, g, m, v, s);
  }
  Tensor squared_norm(const std::vector<Tensor>& xs) override { return launch::squared_norm(xs); }
};

Backend& backend() {
  static KernelBackend instance;
  return instance;
}

}  // namespace cotan::COTAN_KERNELS

namespace cotan {

#if !COTAN_SIMT_EMULATED
Backend* cuda_device_backend() {
  static Backend* const instance = cuda_devices().empty() ? nullptr : &cuda::backend();
  return instance;
}
#elif !defined(COTAN_HAVE_CUDA)
// A build without CUDA has only the emulated twin of this file.
Backend* cuda_device_backend() { return nullptr; }
#endif

}  // namespace cotan
