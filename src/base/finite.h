/*
 * finite.h — finding NaN and infinity in float arrays: the cheap check the
 * pipeline runs on each stage's output (embeddings, noise, latents after
 * every step, reference latents, decoded pixels), so damaged weights or
 * inputs fail naming the stage instead of producing a black image.
 */
#ifndef FX_FINITE_H
#define FX_FINITE_H

#include <stdint.h>

/* Index of the first NaN or ±Inf in x[0..n), or -1 if all are finite. */
int64_t fx_find_nonfinite(const float *x, int64_t n);

/* "nan", "inf" or "-inf" for a non-finite value (messages). */
const char *fx_nonfinite_name(float v);

#endif
