// Which build of the CUDA kernels a translation unit is. Every .cu file under cuda/kernels/ is
// compiled twice: by nvcc into the CUDA backend (namespace cotan::cuda: device memory, kernels on
// the GPU), and by g++ through a one-line wrapper in cuda/emulated/ into the emulated backend
// (namespace cotan::emu: host memory, kernels run by the SIMT emulator). Code written inside
// `namespace cotan::COTAN_KERNELS` gets the right one, so both builds link into one program.
//
// The memory target below is what differs between the two; everything else is shared source.
#pragma once

#include <cstddef>
#include <memory>

#include "cuda/simt/simt.hpp"
#include "tensor/tensor.hpp"

#if COTAN_SIMT_EMULATED
#define COTAN_KERNELS emu
#else
#define COTAN_KERNELS cuda
#endif

namespace cotan::COTAN_KERNELS {

// The device this backend's tensors report: the current CUDA device, or the CPU for the
// emulated backend (its tensors live in host memory, so tests read them directly).
Device target_device();
// Memory for nbytes: device memory from the caching allocator (cuda/allocator.hpp), or 64-byte
// aligned host memory.
std::shared_ptr<Storage> allocate_storage(size_t nbytes);
// An uninitialised contiguous tensor on the target.
Tensor empty_tensor(const Shape& shape, DType dtype);
// Copies nbytes between any two of host memory and target memory, ordered on the current stream.
// A copy to or from host memory has completed when this returns.
void copy_bytes(void* dst, const void* src, size_t nbytes);
// Throws "[op] expects tensors on cuda:0, got cpu" unless every tensor is on the target.
void check_on_target(std::string_view op, const Tensor& t);

}  // namespace cotan::COTAN_KERNELS
