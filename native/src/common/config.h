/*
 * config.h — fh_config defaults, validation and the state-shaping hash, shared by both backends.
 *
 *   fh_default_config / fh_validate_config      the ABI functions (config.cpp)
 *   fh_validate_market(cfg, market, err, len)   market arrays vs config: NULLs, NaN/Inf, splits, window
 *   fh_config_hash(cfg, market)                 FNV-1a 64 of the fields that shape the trainer state
 *                                               (sizes, network, replay) and the market shape
 *   fh_set_error(err, len, fmt, ...)            snprintf into a caller buffer (NULL-safe)
 */
#ifndef FOXHUNT_NATIVE_CONFIG_H
#define FOXHUNT_NATIVE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "foxhunt.h"

fh_status fh_validate_market(const fh_config* cfg, const fh_market* m, char* err, size_t err_len);
uint64_t fh_config_hash(const fh_config* cfg, const fh_market* m);
void fh_set_error(char* err, size_t err_len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

/* Resolved replay capacity: rounded down to a multiple of n_envs. */
int64_t fh_resolved_capacity(const fh_config* cfg);

#endif /* FOXHUNT_NATIVE_CONFIG_H */
