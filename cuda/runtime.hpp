// The CUDA runtime layer: device discovery, error checks and cuBLAS handles.
//
// Device discovery never throws: without a GPU, without a driver, or in a build without CUDA,
// cuda_devices() is empty and cuda_status() says why, so `cotan info` and the CPU paths work on
// any machine. The checks below turn every other CUDA or cuBLAS failure into a cotan::Error that
// carries the failing call, file and line:
//   "[cuda] cudaMalloc(&ptr, n) failed at cuda/memory.cu:42: out of memory (cudaErrorMemoryAllocation)"
// The error macros and cublas_handle() exist only when COTAN_HAVE_CUDA is defined.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cotan_config.h"

#ifdef COTAN_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace cotan {

struct CudaDevice {
  int index = 0;
  std::string name;
  size_t total_memory = 0;  // bytes
  int major = 0, minor = 0;  // compute capability, e.g. 9.0
  int sm_count = 0;
};

// Whether this build contains the CUDA backend.
bool cuda_compiled_in();
// The visible devices; empty when there is no usable GPU or CUDA is not compiled in. Never throws.
std::vector<CudaDevice> cuda_devices();
// One line: "2 CUDA devices (driver 13.0, runtime 13.0)", "no CUDA device: <CUDA's reason>",
// or "CUDA not compiled in". Never throws.
std::string cuda_status();

#ifdef COTAN_HAVE_CUDA

[[noreturn]] void cuda_fail(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void cublas_fail(cublasStatus_t status, const char* call, const char* file, int line);

// The cuBLAS handle of `device`, created on first use and kept for the life of the process. One
// handle per device is shared by all host threads: set its stream (cublasSetStream) before use.
// Throws when the device does not exist or the handle cannot be created.
cublasHandle_t cublas_handle(int device);

#endif  // COTAN_HAVE_CUDA

}  // namespace cotan

#ifdef COTAN_HAVE_CUDA

// Checks a CUDA runtime call; after a kernel launch: CUDA_CHECK(cudaGetLastError()).
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t cotan_cuda_status_ = (call);                                    \
    if (cotan_cuda_status_ != cudaSuccess)                                            \
      ::cotan::cuda_fail(cotan_cuda_status_, #call, __FILE__, __LINE__);              \
  } while (0)

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    const cublasStatus_t cotan_cublas_status_ = (call);                               \
    if (cotan_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                \
      ::cotan::cublas_fail(cotan_cublas_status_, #call, __FILE__, __LINE__);          \
  } while (0)

#endif  // COTAN_HAVE_CUDA
