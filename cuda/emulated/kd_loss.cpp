// The fused distillation loss of the kernel backend, compiled by g++ for the SIMT emulator (cuda/kernels/target.hpp).
#include "cuda/kernels/kd_loss.cu"
