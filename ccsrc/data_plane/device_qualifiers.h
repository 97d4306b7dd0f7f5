// HPS_HOST_DEVICE: marks a function that nvcc compiles for the device as well as the host (the
// functions CUDA kernels share with the CPU's code: data_plane/reduce_op.h,
// backends/cuda/copy_unit.h); nothing for the host compiler.
#pragma once

#if defined(__CUDACC__)
#define HPS_HOST_DEVICE __host__ __device__
#else
#define HPS_HOST_DEVICE
#endif
