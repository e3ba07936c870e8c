// The fused AdamW update of the kernel backend, compiled by g++ for the SIMT emulator (cuda/kernels/target.hpp).
#include "cuda/kernels/optim.cu"
