// Which build of a fused kernel serves tensors on a CUDA device, for the ops outside the op table
// (KD loss, attention, rows, AdamW): the GPU's launcher (cotan::cuda::launch) or, when the SIMT
// emulator stands in for cuda:0 (kCudaEmulatorVariable), the emulated one (cotan::emu::launch).
//
//   Forward f = COTAN_CUDA_LAUNCH(attention_forward(core));
//
// In a build without CUDA a CUDA tensor can only come from the emulator (backend() refuses the
// device otherwise), so the emulated launcher is the only one.
#pragma once

#include "cotan_config.h"
#include "tensor/op_table.hpp"

#ifdef COTAN_HAVE_CUDA
#define COTAN_CUDA_LAUNCH(call) \
  (::cotan::cuda_is_emulated() ? ::cotan::emu::launch::call : ::cotan::cuda::launch::call)
#else
#define COTAN_CUDA_LAUNCH(call) ::cotan::emu::launch::call
#endif
