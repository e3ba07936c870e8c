// The cached attention kernel of the kernel backend, compiled by g++ for the SIMT emulator (cuda/kernels/target.hpp).
#include "cuda/kernels/cached_attention.cu"
