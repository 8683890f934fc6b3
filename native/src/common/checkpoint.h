/*
 * checkpoint.h — checkpoint framing shared by both backends (portable: same payload layout).
 *
 * Bytes: header (56) + payload.
 *   0  char[4]  magic "FHCK"
 *   4  u32      version (FH_CKPT_VERSION)
 *   8  u64      config hash (fh_config_hash: state-shaping config fields + market shape)
 *  16  u64      payload length
 *  24  u8[32]   sha256 of the payload
 *  56  payload  little-endian fields in the order the backend's save writes them (see the backend)
 *
 * fh_ckpt_check() validates size, magic, version, hash, length and checksum before anything is read.
 */
#ifndef FOXHUNT_NATIVE_CHECKPOINT_H
#define FOXHUNT_NATIVE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <string>

#include "foxhunt.h"

#define FH_CKPT_VERSION 1u
#define FH_CKPT_HEADER 56u

/* Serialiser that either counts bytes (buf == NULL) or writes them. */
struct fh_ckpt_writer {
  uint8_t* buf = nullptr;
  uint64_t pos = 0;
  void bytes(const void* p, uint64_t n) {
    if (buf) memcpy(buf + pos, p, (size_t)n);
    pos += n;
  }
  template <typename T>
  void val(const T& v) { bytes(&v, sizeof v); }
  template <typename T>
  void arr(const T* p, uint64_t n) { bytes(p, n * sizeof(T)); }
};

/* Bounds-checked reader over a validated payload. */
struct fh_ckpt_reader {
  const uint8_t* buf = nullptr;
  uint64_t len = 0, pos = 0;
  bool ok = true;
  void bytes(void* p, uint64_t n) {
    if (!ok || n > len - pos) {
      ok = false;
      return;
    }
    memcpy(p, buf + pos, (size_t)n);
    pos += n;
  }
  template <typename T>
  void val(T& v) { bytes(&v, sizeof v); }
  template <typename T>
  void arr(T* p, uint64_t n) { bytes(p, n * sizeof(T)); }
};

/* Write the header for a payload already at buf + FH_CKPT_HEADER. */
void fh_ckpt_write_header(uint8_t* buf, uint64_t config_hash, uint64_t payload_len);

/* Validate a whole checkpoint; on success payload and payload_len point into buf. */
fh_status fh_ckpt_check(const uint8_t* buf, uint64_t len, uint64_t expected_hash, const uint8_t** payload,
                        uint64_t* payload_len, std::string* err);

#endif /* FOXHUNT_NATIVE_CHECKPOINT_H */
