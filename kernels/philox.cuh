/*
 * philox.cuh — Philox-4x32-10 (Salmon et al., SC'11) and the purposes of DESIGN §6.
 *
 *   fh_philox_block(ctr[4], key[2]) -> out[4]      the raw Philox-4x32-10 block (KAT in test/native)
 *   fh_philox(seed, a, b, purpose) -> out[4]        key = (seed lo32, seed hi32),
 *                                                   counter = (a, b lo32, b hi32, purpose)
 *   fh_u01(w)                                       (w >> 8) * 2^-24, a float in [0, 1)
 *   fh_uniform_index(w, n)                          ((uint64)w * n) >> 32, an int in [0, n)
 *
 * Purposes (counter word 3):
 *   FH_PURPOSE_RESET 1          a = env, b = env-step counter; word0 -> episode start
 *   FH_PURPOSE_EXPLORE0 + d     a = env, b = env-step counter; word0 -> epsilon test, word1 -> action
 *   FH_PURPOSE_SAMPLE 8         a = sample j, b = train step; word0 -> offset inside stratum j
 *   FH_PURPOSE_INIT 9           a = param index / 4, b = 0; word (index % 4) -> init value
 */
#ifndef FOXHUNT_KERNELS_PHILOX_CUH
#define FOXHUNT_KERNELS_PHILOX_CUH

#include "hd.cuh"

#define FH_PURPOSE_RESET 1u
#define FH_PURPOSE_EXPLORE0 2u /* + branch d: 2, 3, 4 */
#define FH_PURPOSE_SAMPLE 8u
#define FH_PURPOSE_INIT 9u

#define FH_PHILOX_M0 0xD2511F53u
#define FH_PHILOX_M1 0xCD9E8D57u
#define FH_PHILOX_W0 0x9E3779B9u
#define FH_PHILOX_W1 0xBB67AE85u

/* out = philox4x32_10(ctr, key). out may alias ctr. */
FH_HD void fh_philox_block(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = (uint64_t)FH_PHILOX_M0 * c0;
    const uint64_t p1 = (uint64_t)FH_PHILOX_M1 * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += FH_PHILOX_W0;
    k1 += FH_PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* The project's keyed stream: key = seed, counter = (a, b, purpose). */
FH_HD void fh_philox(uint64_t seed, uint32_t a, uint64_t b, uint32_t purpose, uint32_t out[4]) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t ctr[4] = {a, (uint32_t)b, (uint32_t)(b >> 32), purpose};
  fh_philox_block(ctr, key, out);
}

/* 24 random bits as a float in [0, 1): exact, identical on host and device. */
FH_HD float fh_u01(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* Unbiased-enough index in [0, n) by multiply-shift. */
FH_HD uint32_t fh_uniform_index(uint32_t w, uint32_t n) { return (uint32_t)(((uint64_t)w * n) >> 32); }

#endif /* FOXHUNT_KERNELS_PHILOX_CUH */
