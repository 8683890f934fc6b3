/*
 * gemm_absent.cpp — the GEMM wrapper's functions where cuBLASLt is absent (CI, and any machine with nvcc but not
 * cuBLAS): linked only into libfoxhunt_cuda_linkcheck.so, never into a library that trains. That library is built with
 * -Wl,--no-undefined from every CUDA object and the common sources, so that a symbol the CUDA backend uses but no file
 * defines (a missing template instance, a declared and never written function) fails the build here instead of on a
 * GPU host. Every function reports FH_ERR_UNSUPPORTED.
 */
#include "gemm_cublaslt.h"

static const char kAbsent[] = "built without cuBLASLt: the link-check library cannot run GEMMs";

fh_status fh_gemm_create(fh_gemm** out) {
  if (out) *out = nullptr;
  return FH_ERR_UNSUPPORTED;
}
void fh_gemm_destroy(fh_gemm*) {}
void fh_gemm_set_sm_target(fh_gemm*, int) {}
int fh_gemm_sm_target(const fh_gemm*) { return 0; }
size_t fh_gemm_workspace_bytes(void) { return 0; }
fh_status fh_gemm_fwd(fh_gemm*, cudaStream_t, void*, fh_dtype, int, int, int, const void*, int, const void*, const void*,
                      fh_epilogue, void*, fh_dtype, int, fh_relu_mask) {
  return FH_ERR_UNSUPPORTED;
}
fh_status fh_gemm_dx(fh_gemm*, cudaStream_t, void*, fh_dtype, int, int, int, const void*, int, const void*, void*,
                     fh_dtype, int, fh_relu_mask) {
  return FH_ERR_UNSUPPORTED;
}
fh_status fh_gemm_dw(fh_gemm*, cudaStream_t, void*, fh_dtype, int, int, int, const void*, int, const void*, int, float*,
                     float*, int) {
  return FH_ERR_UNSUPPORTED;
}
const char* fh_gemm_last_error(void) { return kAbsent; }
