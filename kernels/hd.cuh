/*
 * hd.cuh — the one macro that lets the math headers of kernels/ compile for both backends.
 *
 *   FH_HD   __host__ __device__ __forceinline__ under nvcc, plain `inline` under g++.
 *
 * Every shared math function (philox, env, c51, loss, adam, per, replay) is declared FH_HD and is a
 * pure function of its arguments, so the CPU backend (g++) and the CUDA kernels (nvcc) run the same
 * code. Env and money math is float64 and must be compiled without FMA contraction
 * (g++ -ffp-contract=off, nvcc -fmad=false) so both backends agree bit for bit.
 */
#ifndef FOXHUNT_KERNELS_HD_CUH
#define FOXHUNT_KERNELS_HD_CUH

#include <stdint.h>

#if defined(__CUDACC__)
#define FH_HD __host__ __device__ __forceinline__
#else
#define FH_HD inline
#endif

#endif /* FOXHUNT_KERNELS_HD_CUH */
