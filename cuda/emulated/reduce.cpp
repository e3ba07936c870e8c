// The reduce family of the kernel backend, compiled by g++ for the SIMT emulator (cuda/kernels/target.hpp).
#include "cuda/kernels/reduce.cu"
