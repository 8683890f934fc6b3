/*
 * cuda_common.cu — the thread-local CUDA error text used by FH_CUDA_TRY / FH_LAUNCH_CHECK.
 * The trainer copies it into the handle's last_error when an entry point fails.
 */
#include "cuda_common.cuh"

#include <string.h>

static thread_local char fh_cuda_error_text[512];

extern "C" void fh_cuda_set_error(const char* file, int line, const char* what, const char* detail) {
  const char* base = strrchr(file, '/');
  snprintf(fh_cuda_error_text, sizeof fh_cuda_error_text, "%s (%s:%d: %s)", detail ? detail : "CUDA error",
           base ? base + 1 : file, line, what ? what : "");
}

extern "C" const char* fh_cuda_last_error_text(void) { return fh_cuda_error_text; }
