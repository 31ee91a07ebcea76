/*
 * sha256.c — SHA-256 as specified in FIPS 180-4 §4.1.2, §4.2.2, §5.3.3, §6.2.
 *
 * The message is processed in 64-byte blocks, each expanded to a 64-word
 * schedule W and mixed into the 8-word state by 64 rounds. Padding: 0x80,
 * zeros up to 56 mod 64, the message length in bits as a big-endian u64.
 */
#include "sha256.h"

#include <string.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4 §4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static inline uint32_t load_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* One 64-byte block into the state (§6.2.2). */
static void compress(uint32_t state[8], const uint8_t *block) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++) w[t] = load_be32(block + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + S1 + ch + K[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        h = g, g = f, f = e, e = d + t1;
        d = c, c = b, b = a, a = t1 + t2;
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d;
    state[4] += e, state[5] += f, state[6] += g, state[7] += h;
}

/* ------------------------------------------------------------------------ */
/* x86 SHA extensions                                                       */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI_PATH 1

/* CPUID.(EAX=7,ECX=0):EBX bit 29 = SHA; SSSE3 and SSE4.1 (leaf 1 ECX bits
 * 9 and 19) for the shuffles around it. Asked per hash (init), no global
 * state. */
static int cpu_has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return 0;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 29) & 1;
}

/* n 64-byte blocks. The extension keeps the state as two vectors, ABEF and
 * CDGH (lane 3 first); each sha256rnds2 does two rounds, so a group of four
 * message words W[4g..4g+3] (+ K) takes two, the second on the upper half.
 * From group 4 on the schedule is
 *   W[g] = msg2(msg1(W[g-4], W[g-3]) + words t-7..t-4, W[g-1]). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_sha_ni(uint32_t state[8], const uint8_t *p,
                                                                        size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i dcba = _mm_loadu_si128((const __m128i *)state);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)(state + 4));
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; n; n--, p += 64) {
        __m128i save0 = abef, save1 = cdgh, w[4];
        for (int g = 0; g < 16; g++) {
            __m128i cur;
            if (g < 4) {
                cur = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            } else {
                __m128i t7_4 = _mm_alignr_epi8(w[(g + 3) & 3], w[(g + 2) & 3], 4);
                cur = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w[g & 3], w[(g + 1) & 3]), t7_4),
                                           w[(g + 3) & 3]);
            }
            w[g & 3] = cur;
            __m128i msg = _mm_add_epi32(cur, _mm_loadu_si128((const __m128i *)(K + 4 * g)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, msg);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(msg, 0x0E));
        }
        abef = _mm_add_epi32(abef, save0);
        cdgh = _mm_add_epi32(cdgh, save1);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)state, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

/* n consecutive blocks with the chosen implementation. */
static void compress_blocks(fx_sha256 *h, const uint8_t *p, size_t n) {
#ifdef HAVE_SHA_NI_PATH
    if (h->sha_ni) {
        compress_sha_ni(h->state, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64) compress(h->state, p);
}

void fx_sha256_init(fx_sha256 *h) {
    /* first 32 bits of the fractional parts of the square roots of the first
     * 8 primes (§5.3.3) */
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, H0, sizeof H0);
    h->bytes = 0;
    h->used = 0;
#ifdef HAVE_SHA_NI_PATH
    h->sha_ni = cpu_has_sha_ni();
#else
    h->sha_ni = 0;
#endif
}

void fx_sha256_update(fx_sha256 *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->bytes += n;
    if (h->used) { /* top up the pending block first */
        size_t take = 64 - h->used < n ? 64 - h->used : n;
        memcpy(h->block + h->used, p, take);
        h->used += take, p += take, n -= take;
        if (h->used < 64) return;
        compress_blocks(h, h->block, 1);
        h->used = 0;
    }
    compress_blocks(h, p, n / 64);
    p += n / 64 * 64, n %= 64;
    memcpy(h->block, p, n);
    h->used = n;
}

void fx_sha256_final(fx_sha256 *h, uint8_t digest[FX_SHA256_BYTES]) {
    uint64_t bits = h->bytes * 8;
    h->block[h->used++] = 0x80;
    if (h->used > 56) { /* no room for the length: one more block */
        memset(h->block + h->used, 0, 64 - h->used);
        compress_blocks(h, h->block, 1);
        h->used = 0;
    }
    memset(h->block + h->used, 0, 56 - h->used);
    for (int i = 0; i < 8; i++) h->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress_blocks(h, h->block, 1);
    for (int i = 0; i < 8; i++) store_be32(digest + 4 * i, h->state[i]);
    memset(h, 0, sizeof *h);
}

void fx_sha256_buf(const void *data, size_t n, uint8_t digest[FX_SHA256_BYTES]) {
    fx_sha256 h;
    fx_sha256_init(&h);
    fx_sha256_update(&h, data, n);
    fx_sha256_final(&h, digest);
}

void fx_sha256_hex(const uint8_t digest[FX_SHA256_BYTES], char hex[2 * FX_SHA256_BYTES + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < FX_SHA256_BYTES; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[2 * FX_SHA256_BYTES] = '\0';
}
