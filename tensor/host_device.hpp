// COTAN_HOST_DEVICE marks functions that the CUDA kernels call too: host and device functions
// under nvcc, plain functions elsewhere. The headers that use it (tensor/random.hpp,
// tensor/unary_math.hpp, tensor/adamw_element.hpp) include nothing of cuda/.
#pragma once

#if defined(__CUDACC__)
#define COTAN_HOST_DEVICE __host__ __device__
#else
#define COTAN_HOST_DEVICE
#endif
