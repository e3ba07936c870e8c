#include "tensor/op_table.hpp"

#include <cstdlib>
#include <string_view>

#include "cuda/emulated/backend.hpp"
#include "cuda/kernels/backend.hpp"
#include "cuda/runtime.hpp"
#include "tensor/cpu/backend.hpp"

namespace cotan {

namespace {
// The backend serving CUDA devices, once found: the emulator (kCudaEmulatorVariable) or the GPU's.
Backend* cuda_backend = nullptr;
}  // namespace

bool cuda_emulator_requested() {
  const char* value = std::getenv(kCudaEmulatorVariable);
  return value && *value && std::string_view(value) != "0";
}

Backend& cpu_backend() {
  static cpu::CpuBackend instance;
  return instance;
}

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu_backend();
  if (cuda_backend) return *cuda_backend;
  if (cuda_emulator_requested()) {
    if (device.index != 0)
      fail("cuda", "cannot use ", to_string(device), ": the emulator (", kCudaEmulatorVariable, ") serves cuda:0 only");
    emu::serve_device(Device::cuda(0));
    cuda_backend = &emu::backend();
    return *cuda_backend;
  }
  if (Backend* found = cuda_device_backend()) return *found;
  if (!cuda_compiled_in()) fail("device", "cannot use ", to_string(device), ": this build has no CUDA backend");
  fail("cuda", cuda_status());  // "[cuda] no CUDA device: <the driver's reason>"
}

void Backend::set_tf32(bool enabled) {
  if (enabled) fail("tf32", "TF32 is a mode of the CUDA matmuls; the ", name(), " backend has none");
}

std::shared_ptr<Storage> allocate(size_t nbytes, Device device) {
  if (nbytes > kMaxTensorBytes)
    fail("allocate", "cannot allocate ", nbytes, " bytes on ", to_string(device), ": above the limit of ", kMaxTensorBytes,
         " bytes");
  return backend(device).allocate(nbytes);
}

}  // namespace cotan

// ---- threads ----
#include <tbb/global_control.h>
#include <tbb/info.h>

#include "tensor/ops.hpp"

namespace cotan {

namespace {
std::unique_ptr<tbb::global_control> thread_limit;
}

void set_num_threads(int n) {
  if (n < 0) fail("set_num_threads", "thread count ", n, " is negative");
  thread_limit.reset();
  if (n > 0) thread_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(n));
}

int num_threads() { return int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)); }

}  // namespace cotan
