/*
 * lib/sha256.h — SHA-256 (FIPS 180-4), to identify vocabularies and inputs by content.
 *
 *     lt_sha256 h; lt_sha256_init(&h); lt_sha256_update(&h, data, len); ...
 *     char hex[LT_SHA256_HEX_LEN + 1]; lt_sha256_final_hex(&h, hex);
 *
 * Plain C (the SHA extensions where an x86-64 CPU has them), no allocation; one lt_sha256
 * per thread.
 */
#ifndef LT_SHA256_H
#define LT_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LT_SHA256_LEN 32     /* digest bytes */
#define LT_SHA256_HEX_LEN 64 /* digest as lowercase hex digits */

typedef struct lt_sha256 {
    uint32_t state[8];
    uint64_t total;       /* bytes hashed so far */
    unsigned char block[64];
    size_t fill;          /* bytes waiting in block */
} lt_sha256;

void lt_sha256_init(lt_sha256 *h);
void lt_sha256_update(lt_sha256 *h, const void *data, size_t len);
void lt_sha256_final(lt_sha256 *h, unsigned char digest[LT_SHA256_LEN]);
/* Final digest as 64 lowercase hex digits and a NUL. */
void lt_sha256_final_hex(lt_sha256 *h, char hex[LT_SHA256_HEX_LEN + 1]);
/* A digest (e.g. one stored in a file header) as 64 lowercase hex digits and a NUL. */
void lt_sha256_digest_hex(const unsigned char digest[LT_SHA256_LEN], char hex[LT_SHA256_HEX_LEN + 1]);
/* One-shot helper. */
void lt_sha256_hex(const void *data, size_t len, char hex[LT_SHA256_HEX_LEN + 1]);

/* Whether blocks go through the CPU's SHA extensions (x86-64 SHA-NI) rather than the
 * portable rounds; the digests are the same. */
bool lt_sha256_accelerated(void);
/* For tests and benchmarks: true makes every later block take the portable rounds (all
 * threads). Returns the previous setting. */
bool lt_sha256_force_portable(bool on);

#endif /* LT_SHA256_H */
