/*
 * sha256.h — SHA-256 (FIPS 180-4) for checkpoint checksums. Streaming: init, update*, final.
 */
#ifndef FOXHUNT_NATIVE_SHA256_H
#define FOXHUNT_NATIVE_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct fh_sha256 {
  uint32_t h[8];
  uint64_t length;      /* bytes hashed so far */
  uint8_t block[64];
  size_t used;          /* bytes in block */
};

void fh_sha256_init(fh_sha256* s);
void fh_sha256_update(fh_sha256* s, const void* data, size_t n);
void fh_sha256_final(fh_sha256* s, uint8_t out[32]);
void fh_sha256_bytes(const void* data, size_t n, uint8_t out[32]);

#endif /* FOXHUNT_NATIVE_SHA256_H */
