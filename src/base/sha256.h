/*
 * sha256.h — SHA-256 (FIPS 180-4), our own implementation.
 *
 * Used where content must be identified exactly: the embedding cache keys
 * (model identity + token ids) and the checksums of its on-disk entries.
 * Streaming: init, any number of updates of any length, final. On x86-64
 * CPUs with the SHA extensions (SHA-NI: Intel since Ice Lake / Goldmont, AMD
 * since Zen) the block function uses them (~5x faster: hashing a 15.7 MB
 * klein-4B cache entry takes a few ms); elsewhere portable C.
 *
 *     fx_sha256 h;
 *     fx_sha256_init(&h);
 *     fx_sha256_update(&h, data, n);
 *     uint8_t digest[FX_SHA256_BYTES];
 *     fx_sha256_final(&h, digest);
 */
#ifndef FX_SHA256_H
#define FX_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define FX_SHA256_BYTES 32

typedef struct fx_sha256 {
    uint32_t state[8];
    uint64_t bytes;        /* message length so far */
    uint8_t block[64];     /* pending input, `used` bytes */
    size_t used;
    int sha_ni;            /* 1: x86 SHA extensions (chosen by init; tests
                              may set 0 to force the portable rounds) */
} fx_sha256;

void fx_sha256_init(fx_sha256 *h);
void fx_sha256_update(fx_sha256 *h, const void *data, size_t n);
/* Pad, write the digest; h must be re-initialised before reuse. */
void fx_sha256_final(fx_sha256 *h, uint8_t digest[FX_SHA256_BYTES]);

/* One-shot digest of data[0, n). */
void fx_sha256_buf(const void *data, size_t n, uint8_t digest[FX_SHA256_BYTES]);

/* Lower-case hex of a digest: 64 characters + NUL into hex. */
void fx_sha256_hex(const uint8_t digest[FX_SHA256_BYTES], char hex[2 * FX_SHA256_BYTES + 1]);

#endif
