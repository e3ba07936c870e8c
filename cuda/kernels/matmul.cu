// Matmul launchers: [B..., M, K] x [B..., K, N] -> [B..., M, N], a fresh contiguous tensor.
// Dtypes and shapes are checked by Backend::matmul (tensor/op_checks.cpp).
//
// On the GPU the op table's matmul is cuBLAS (cublasGemmStridedBatchedEx): f64, f32 (TF32 only
// when set_tf32(true)), bf16 operands and result with f32 accumulation. An operand whose
// matrices are row-major or column-major (transposed) with some leading dimension is passed as
// it is, its layout mapped to cuBLAS's op flags; any other operand is copied to row-major first
// (broadcast batch dims stay stride 0, so a broadcast operand is copied once). The batch goes
// to cuBLAS as strided runs: batch dims that merge into one stride for both operands make one
// call, the others are looped over on the host.
//
// matmul_kernel runs the hand-written kernels of matmul.cuh instead, on any strides. It is the
// emulated backend's matmul, and on the GPU the reference cuBLAS is checked against.
#include <atomic>
#include <climits>
#include <optional>

#include "cuda/kernels/launch.hpp"
#include "cuda/kernels/matmul.cuh"
#include "cuda/kernels/matmul.hpp"

#if !COTAN_SIMT_EMULATED
#include "cuda/runtime.hpp"
#endif

namespace cotan::COTAN_KERNELS {
namespace {

// The output shape and M, N, K of a checked pair (Backend::matmul; the kernel entry point of the
// tests passes valid operands): only the device is checked here.
struct MatmulShape {
  Shape out;
  int64_t m, n, k;
};

MatmulShape matmul_shape(const Tensor& a, const Tensor& b) {
  check_on_target("matmul", a);
  check_on_target("matmul", b);
  const size_t nd = size_t(a.dim());
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  MatmulShape s{Shape(as.begin(), as.end() - 1), as[nd - 2], bs[nd - 1], as[nd - 1]};
  s.out.push_back(s.n);
  return s;
}

Shape batch_shape(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }
Strides batch_strides(const Tensor& t) { return Strides(t.strides().begin(), t.strides().end() - 2); }

// Where each matrix of the batch starts in a and in b (one merged layout for both).
StridedLayout<2> batch_layout(const Tensor& a, const Tensor& b) {
  const Strides as = batch_strides(a), bs = batch_strides(b);
  return make_layout<2>(batch_shape(a), {&as, &bs});
}

template <class T>
void launch_gemm(void (*kernel)(GemmArgs, const T*, const T*, T*), simt::Dim3 grid, simt::Dim3 block,
                 const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  simt::launch(kernel, grid, block, 0, g, static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr()),
               static_cast<T*>(out.data_ptr()));
}

// C = A B with the kernels of matmul.cuh, into `out` (contiguous; M, N, K > 0).
void kernel_gemm(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulShape& s) {
  const size_t nd = size_t(a.dim());
  GemmArgs g{batch_layout(a, b), numel(batch_shape(a)), s.m, s.n, s.k,
             a.strides()[nd - 2], a.strides()[nd - 1], b.strides()[nd - 2], b.strides()[nd - 1]};
  constexpr int64_t kMaxGridZ = 65535;
  const simt::Dim3 grid{unsigned((s.n + kGemmTile - 1) / kGemmTile), unsigned((s.m + kGemmTile - 1) / kGemmTile),
                        unsigned(std::min(g.batches, kMaxGridZ))};
  check(grid.y <= kMaxGridZ, "matmul", "M = ", s.m, " exceeds the kernel's grid");
  const simt::Dim3 tiled_block{kTiledThreads, kTiledThreads, 1}, mma_block{kMmaThreads, 1, 1};
  switch (a.dtype()) {
    case DType::f64: return launch_gemm(tiled_gemm_kernel<double>, grid, tiled_block, g, a, b, out);
    case DType::f32: return launch_gemm(tiled_gemm_kernel<float>, grid, tiled_block, g, a, b, out);
    case DType::bf16: return launch_gemm(tensor_core_gemm_kernel, grid, mma_block, g, a, b, out);
    default: fail("matmul", "expects a floating dtype, got ", a.dtype());
  }
}

// The product's result when there is nothing to multiply: empty, or zeros (K = 0).
bool trivial_matmul(const Tensor& out, int64_t k) {
  if (out.numel() == 0) return true;
  if (k > 0) return false;
  launch::fill(out, 0);
  return true;
}

#if !COTAN_SIMT_EMULATED

std::atomic<bool> use_tf32{false};

// An operand as cuBLAS reads it: every matrix row-major (element (i, j) at i * ld + j) or
// column-major (at i + j * ld), from `data` plus its batch offset.
struct BlasOperand {
  Tensor t;
  bool column_major;
  int64_t ld;
};

// The layout of a rows x cols matrix with the given strides, if cuBLAS can read it as it is.
std::optional<BlasOperand> blas_layout(const Tensor& t, int64_t rows, int64_t cols) {
  const int64_t rs = t.strides()[size_t(t.dim() - 2)], cs = t.strides()[size_t(t.dim() - 1)];
  switch (operand_layout(rows, cols, rs, cs)) {
    case 'n': return BlasOperand{t, false, rows == 1 ? cols : rs};
    case 't': return BlasOperand{t, true, cols == 1 ? rows : cs};
    default: return std::nullopt;
  }
}

// t as cuBLAS can read it: itself, or a row-major copy whose broadcast batch dims keep stride 0.
BlasOperand blas_operand(const Tensor& t, int64_t rows, int64_t cols) {
  if (auto as_is = blas_layout(t, rows, cols)) return *as_is;
  Shape distinct = t.shape();
  for (int64_t d = 0; d < t.dim() - 2; ++d)
    if (t.strides()[size_t(d)] == 0) distinct[size_t(d)] = 1;
  Tensor dense = empty_tensor(distinct, t.dtype());
  launch::assign(dense, t.as_strided(distinct, t.strides(), t.offset()));
  Strides strides = dense.strides();
  for (int64_t d = 0; d < t.dim() - 2; ++d)
    if (t.strides()[size_t(d)] == 0) strides[size_t(d)] = 0;
  return *blas_layout(dense.as_strided(t.shape(), strides, 0), rows, cols);
}

struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

BlasTypes blas_types(DType t) {
  switch (t) {
    case DType::f64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::f32: return {CUDA_R_32F, use_tf32.load() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::bf16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default: fail("matmul", "expects a floating dtype, got ", t);
  }
}

int blas_int(int64_t v, const char* what) {
  check(v <= INT_MAX, "matmul", what, " = ", v, " exceeds cuBLAS's 32-bit sizes");
  return int(v);
}

// C = A B with cuBLAS into `out` (contiguous; M, N, K > 0).
void blas_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const MatmulShape& s) {
  const BlasOperand a = blas_operand(a_in, s.m, s.k), b = blas_operand(b_in, s.k, s.n);
  const BlasTypes types = blas_types(out.dtype());
  const size_t esize = dtype_size(out.dtype());
  cublasHandle_t handle = cublas_handle(target_device().index);
  CUBLAS_CHECK(cublasSetStream(handle, simt::current_stream()));
  const double one = 1.0, zero = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool wide = types.compute == CUBLAS_COMPUTE_64F;
  const int m = blas_int(s.m, "M"), n = blas_int(s.n, "N"), k = blas_int(s.k, "K");
  const int lda = blas_int(a.ld, "leading dimension"), ldb = blas_int(b.ld, "leading dimension");
  // Batch runs: the innermost merged batch dim is one strided call, the rest a host loop.
  const StridedLayout<2> layout = batch_layout(a.t, b.t);
  const int64_t run = layout.sizes[layout.ndim - 1];
  const int64_t a_step = layout.strides[0][layout.ndim - 1], b_step = layout.strides[1][layout.ndim - 1];
  const int64_t runs = numel(batch_shape(a.t)) / run;
  const char* a_data = static_cast<const char*>(a.t.data_ptr());
  const char* b_data = static_cast<const char*>(b.t.data_ptr());
  char* c_data = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < runs; ++r) {
    int64_t at[2];
    layout.offsets(r * run, at);
    // Row-major C (M x N) is column-major C^T = B^T A^T (N x M, ld N): cuBLAS's first operand is
    // B. A row-major operand read column-major is its transpose already (op N); a column-major
    // one needs op T.
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, b.column_major ? CUBLAS_OP_T : CUBLAS_OP_N, a.column_major ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
        wide ? static_cast<const void*>(&one) : &one_f, b_data + at[1] * int64_t(esize), types.data, ldb, b_step,
        a_data + at[0] * int64_t(esize), types.data, lda, a_step, wide ? static_cast<const void*>(&zero) : &zero_f,
        c_data + r * run * s.m * s.n * int64_t(esize), types.data, n, s.m * s.n, blas_int(run, "batch"),
        types.compute, CUBLAS_GEMM_DEFAULT));
  }
}

#endif

}  // namespace

#if !COTAN_SIMT_EMULATED
void set_tf32(bool enabled) { use_tf32.store(enabled); }
bool tf32_enabled() { return use_tf32.load(); }
#endif

namespace launch {

Tensor matmul_kernel(const Tensor& a, const Tensor& b) {
  const MatmulShape s = matmul_shape(a, b);
  Tensor out = empty_tensor(s.out, a.dtype());
  if (!trivial_matmul(out, s.k)) kernel_gemm(a, b, out, s);
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
#if COTAN_SIMT_EMULATED
  return matmul_kernel(a, b);
#else
  const MatmulShape s = matmul_shape(a, b);
  Tensor out = empty_tensor(s.out, a.dtype());
  if (!trivial_matmul(out, s.k)) blas_gemm(a, b, out, s);
  return out;
#endif
}

}  // namespace launch
}  // namespace cotan::COTAN_KERNELS
