// The CUDA runtime layer: device discovery, error reporting and per-device cuBLAS handles.
#include "cuda/runtime.hpp"

#include <mutex>
#include <string_view>

#include "tensor/error.hpp"

namespace cotan {
namespace {

// "out of memory (cudaErrorMemoryAllocation)".
std::string describe(cudaError_t status) {
  return cat(cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}

// 13000 -> "13.0".
std::string version_string(int version) { return cat(version / 1000, ".", version % 1000 / 10); }

// Sources are compiled as "../cuda/x.cu" from inside the build directory: report "cuda/x.cu".
std::string_view source_path(std::string_view file) {
  while (file.starts_with("../")) file.remove_prefix(3);
  return file;
}

// cudaGetDeviceCount with its failures (no device, no driver, driver too old) read as zero
// devices. The error is cleared so that later runtime calls do not report it again.
int device_count(cudaError_t& status) {
  int count = 0;
  status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  return count;
}

}  // namespace

bool cuda_compiled_in() { return true; }

std::vector<CudaDevice> cuda_devices() {
  std::vector<CudaDevice> devices;
  try {
    cudaError_t status = cudaSuccess;
    const int count = device_count(status);
    for (int index = 0; index < count; ++index) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      devices.push_back({index, prop.name, prop.totalGlobalMem, prop.major, prop.minor,
                         prop.multiProcessorCount});
    }
  } catch (...) {
    devices.clear();  // only std::bad_alloc can get here
  }
  return devices;
}

std::string cuda_status() {
  try {
    cudaError_t status = cudaSuccess;
    const int count = device_count(status);
    if (status != cudaSuccess) return "no CUDA device: " + describe(status);
    if (count == 0) return "no CUDA device: the driver reports none";
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    return cat(count, count == 1 ? " CUDA device" : " CUDA devices", " (driver ", version_string(driver),
               ", runtime ", version_string(runtime), ")");
  } catch (...) {
    return "no CUDA device: out of memory while asking";
  }
}

void cuda_fail(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(cat("[cuda] ", call, " failed at ", source_path(file), ":", line, ": ", describe(status)));
}

void cublas_fail(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(cat("[cublas] ", call, " failed at ", source_path(file), ":", line, ": ",
                  cublasGetStatusString(status), " (", cublasGetStatusName(status), ")"));
}

cublasHandle_t cublas_handle(int device) {
  // Never destroyed: cublasDestroy in a static destructor can run after the CUDA runtime has
  // been torn down. The process exit releases the handles.
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles;

  std::lock_guard<std::mutex> lock(mutex);
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  check(device >= 0 && device < count, "cuda", "no CUDA device ", device, " (", count, " found)");
  if (handles.size() < size_t(count)) handles.resize(size_t(count), nullptr);

  cublasHandle_t& handle = handles[size_t(device)];
  if (!handle) {
    int previous = 0;
    CUDA_CHECK(cudaGetDevice(&previous));
    CUDA_CHECK(cudaSetDevice(device));
    const cublasStatus_t created = cublasCreate(&handle);
    const cudaError_t restored = cudaSetDevice(previous);
    if (created != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      cublas_fail(created, "cublasCreate(&handle)", __FILE__, __LINE__);
    }
    if (restored != cudaSuccess) cuda_fail(restored, "cudaSetDevice(previous)", __FILE__, __LINE__);
  }
  return handle;
}

}  // namespace cotan
