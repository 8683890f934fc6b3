/* checkpoint.cpp — header write and validation (see checkpoint.h). */
#include "checkpoint.h"

#include <stdio.h>

#include "sha256.h"

void fh_ckpt_write_header(uint8_t* buf, uint64_t config_hash, uint64_t payload_len) {
  const uint32_t version = FH_CKPT_VERSION;
  memcpy(buf, "FHCK", 4);
  memcpy(buf + 4, &version, 4);
  memcpy(buf + 8, &config_hash, 8);
  memcpy(buf + 16, &payload_len, 8);
  fh_sha256_bytes(buf + FH_CKPT_HEADER, (size_t)payload_len, buf + 24);
}

fh_status fh_ckpt_check(const uint8_t* buf, uint64_t len, uint64_t expected_hash, const uint8_t** payload,
                        uint64_t* payload_len, std::string* err) {
  char msg[256];
  if (buf == NULL) {
    *err = "checkpoint: buffer is NULL";
    return FH_ERR_INVALID_ARGUMENT;
  }
  if (len < FH_CKPT_HEADER) {
    snprintf(msg, sizeof msg, "checkpoint: truncated (%llu bytes, the header alone is %u)", (unsigned long long)len,
             FH_CKPT_HEADER);
    *err = msg;
    return FH_ERR_CHECKPOINT;
  }
  if (memcmp(buf, "FHCK", 4) != 0) {
    *err = "checkpoint: bad magic (not a foxhunt checkpoint)";
    return FH_ERR_CHECKPOINT;
  }
  uint32_t version;
  uint64_t hash, plen;
  memcpy(&version, buf + 4, 4);
  memcpy(&hash, buf + 8, 8);
  memcpy(&plen, buf + 16, 8);
  if (version != FH_CKPT_VERSION) {
    snprintf(msg, sizeof msg, "checkpoint: version %u, this library reads version %u", version, FH_CKPT_VERSION);
    *err = msg;
    return FH_ERR_CHECKPOINT;
  }
  if (hash != expected_hash) {
    snprintf(msg, sizeof msg, "checkpoint: config hash %016llx does not match this trainer's %016llx",
             (unsigned long long)hash, (unsigned long long)expected_hash);
    *err = msg;
    return FH_ERR_CHECKPOINT;
  }
  if (plen != len - FH_CKPT_HEADER) {
    snprintf(msg, sizeof msg, "checkpoint: truncated or padded (header says %llu payload bytes, got %llu)",
             (unsigned long long)plen, (unsigned long long)(len - FH_CKPT_HEADER));
    *err = msg;
    return FH_ERR_CHECKPOINT;
  }
  uint8_t sum[32];
  fh_sha256_bytes(buf + FH_CKPT_HEADER, (size_t)plen, sum);
  if (memcmp(sum, buf + 24, 32) != 0) {
    *err = "checkpoint: sha256 of the payload does not match (corrupt)";
    return FH_ERR_CHECKPOINT;
  }
  *payload = buf + FH_CKPT_HEADER;
  *payload_len = plen;
  return FH_OK;
}
