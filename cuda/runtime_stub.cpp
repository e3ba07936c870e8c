// The CUDA runtime layer in a build without CUDA (-Dcuda=disabled, or no toolkit found): no
// devices, and a status line that says so.
#include "cuda/runtime.hpp"

namespace cotan {

bool cuda_compiled_in() { return false; }

std::vector<CudaDevice> cuda_devices() { return {}; }

std::string cuda_status() { return "CUDA not compiled in"; }

}  // namespace cotan
