// The row kernels of the fused layers, compiled by g++ for the SIMT emulator (cuda/kernels/target.hpp).
#include "cuda/kernels/rows.cu"
