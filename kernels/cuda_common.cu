/*
 * cuda_common.cu — the thread-local CUDA error text used by FH_CUDA_TRY / FH_LAUNCH_CHECK.
 * The trainer copies it into the handle's last_error when an entry point fails. And fh_pdl_on (FH_PDL).
 */
#include "cuda_common.cuh"

#include <stdlib.h>
#include <atomic>
#include <string.h>

static thread_local char fh_cuda_error_text[512];

extern "C" void fh_cuda_set_error(const char* file, int line, const char* what, const char* detail) {
  const char* base = strrchr(file, '/');
  snprintf(fh_cuda_error_text, sizeof fh_cuda_error_text, "%s (%s:%d: %s)", detail ? detail : "CUDA error",
           base ? base + 1 : file, line, what ? what : "");
}

extern "C" const char* fh_cuda_last_error_text(void) { return fh_cuda_error_text; }

/* -1: not read yet; the trainer's create reads FH_PDL again (fh_pdl_configure), so one process can build a
 * trainer with PDL and one without (graphs keep the launches they captured). */
static std::atomic<int> fh_pdl_state{-1};

static int fh_pdl_from_env() {
  const char* e = getenv("FH_PDL");
  return e && e[0] == '0' ? 0 : 1;
}

extern "C" void fh_pdl_configure(void) { fh_pdl_state.store(fh_pdl_from_env(), std::memory_order_relaxed); }

extern "C" int fh_pdl_on(void) {
  int v = fh_pdl_state.load(std::memory_order_relaxed);
  if (v < 0) {
    v = fh_pdl_from_env();
    fh_pdl_state.store(v, std::memory_order_relaxed);
  }
  return v;
}
