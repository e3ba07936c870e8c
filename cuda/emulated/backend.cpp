// The kernel backend (cuda/kernels/backend.cu), compiled by g++ for the SIMT emulator.
#include "cuda/kernels/backend.cu"
