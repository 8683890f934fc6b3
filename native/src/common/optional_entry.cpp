/*
 * optional_entry.cpp — weak default definitions of test-only entry points that a backend may not
 * implement yet. A backend's own (strong) definition replaces them at link time; without one, the
 * library still exports the symbol (so one binding fits both libraries) and answers
 * FH_ERR_UNSUPPORTED.
 */
#include "foxhunt.h"

extern "C" FH_API __attribute__((weak)) fh_status fh_trainer_replay_sample(fh_trainer* t, int32_t n, uint64_t draw,
                                                                           float beta, int64_t* slot,
                                                                           int64_t* next_slot, float* obs,
                                                                           int32_t* act, float* ret, float* disc,
                                                                           float* next_obs, float* weight) {
  return FH_ERR_UNSUPPORTED;
}
