/*
 * rng.h — the noise generator of flux.c: seed → initial latent noise.
 *
 * The same (seed, shape) gives the same float32 noise on every machine,
 * compiler, ISA and thread count. Each value depends only on (seed, its
 * flat index), so the noise can be filled in parallel in any order, and only
 * IEEE-754 double operations that are exactly specified (+, −, ×, ÷, sqrt,
 * compare) are used: no libm log/cos, no fused multiply-add (src/dit/rng.c is
 * compiled without FP contraction).
 *
 * Algorithm (normative; any tool can reproduce it):
 *
 *   mix64(z)  = SplitMix64 finaliser:
 *               z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *               z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
 *   key       = mix64(seed ^ 0x6E6F6973652E6678)          ("noise.fx" in ASCII)
 *   word(c)   = mix64(key + (c + 1) · 0x9E3779B97F4A7C15)  (mod 2^64)
 *   unit(r)   = (2·(r >> 12) + 1) · 2^−52 − 1              ∈ (−1, 1), symmetric
 *
 *   value i (flat index): Marsaglia's polar method on the counter stream
 *   c = 128·i + 2·j, j = 0, 1, ..., 63 (attempt j):
 *     u = unit(word(c)), v = unit(word(c + 1)), s = u·u + v·v
 *     accept the first attempt with s < 1 (s > 0 always holds), then
 *       z = u · sqrt(−2·ln(s) / s)        (double) → (float)z
 *     (if 64 attempts are all rejected — probability 2^−142 — z = 0)
 *   ln is fx_rng_log below: s = m·2^e with m in [√½, √2), f = (m−1)/(m+1),
 *   ln m = 2f·Σ_{k=0..11} f^(2k)/(2k+1) (Horner, from k = 11 down),
 *   ln s = e·LN2_HI + (e·LN2_LO + ln m) with the fdlibm split of ln 2.
 *
 * Noise of shape [128, h, w] uses i = (c·h + y)·w + x (channel-major, the
 * order of the official pipeline's randn((1, 128, h, w))). A value does not
 * depend on the shape, so the first channels of a larger image do not equal
 * a smaller one's; no size-independence is attempted.
 */
#ifndef FX_RNG_H
#define FX_RNG_H

#include <stdint.h>

#include "simd/kernels.h"

/* The normal value at flat index i of the stream of `seed`. */
float fx_rng_normal_at(uint64_t seed, uint64_t i);

/* out[k] = fx_rng_normal_at(seed, first + k) for k < n, OpenMP-parallel
 * (kc->threads; kc may be NULL for one thread). */
void fx_rng_normal_fill(const fx_kctx *kc, uint64_t seed, uint64_t first, int64_t n, float *out);

/* Initial noise [channels, h, w] for a seed (flat index order as above). */
void fx_rng_noise(const fx_kctx *kc, uint64_t seed, int channels, int h, int w, float *out);

/* The deterministic natural logarithm used by the generator, for x > 0
 * finite (exposed for tests; accurate to ~1 ulp). */
double fx_rng_log(double x);

/* The SplitMix64 finaliser above. */
uint64_t fx_rng_mix64(uint64_t z);

#endif
