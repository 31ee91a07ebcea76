/*
 * latents.c — pack/unpack, patchify/unpatchify, BatchNorm (de)normalisation
 * and the final float → RGB8 conversion (latents.h). Small tensors: plain
 * loops, no threads.
 */
#include "latents.h"

#include <math.h>

void fx_latents_pack(const float *chw, int c, int h, int w, float *tokens, int64_t ld) {
    int64_t hw = (int64_t)h * w;
    for (int64_t n = 0; n < hw; n++)
        for (int k = 0; k < c; k++) tokens[n * ld + k] = chw[(int64_t)k * hw + n];
}

void fx_latents_unpack(const float *tokens, int64_t ld, int c, int h, int w, float *chw) {
    int64_t hw = (int64_t)h * w;
    for (int k = 0; k < c; k++)
        for (int64_t n = 0; n < hw; n++) chw[(int64_t)k * hw + n] = tokens[n * ld + k];
}

void fx_patchify(const float *z, int c, int h, int w, int ph, int pw, float *out) {
    int64_t W = (int64_t)w * pw, HW = (int64_t)h * ph * W;
    for (int ch = 0; ch < c; ch++)
        for (int pi = 0; pi < ph; pi++)
            for (int pj = 0; pj < pw; pj++) {
                float *o = out + ((int64_t)(ch * ph + pi) * pw + pj) * h * w;
                const float *src = z + ch * HW;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++) o[(int64_t)y * w + x] = src[((int64_t)y * ph + pi) * W + (int64_t)x * pw + pj];
            }
}

void fx_unpatchify(const float *p, int c, int h, int w, int ph, int pw, float *out) {
    int64_t W = (int64_t)w * pw, HW = (int64_t)h * ph * W;
    for (int ch = 0; ch < c; ch++)
        for (int pi = 0; pi < ph; pi++)
            for (int pj = 0; pj < pw; pj++) {
                const float *src = p + ((int64_t)(ch * ph + pi) * pw + pj) * h * w;
                float *dst = out + ch * HW;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++) dst[((int64_t)y * ph + pi) * W + (int64_t)x * pw + pj] = src[(int64_t)y * w + x];
            }
}

void fx_bn_denormalize(float *x, int c, int64_t hw, const float *mean, const float *var, float eps) {
    for (int k = 0; k < c; k++) {
        double sd = sqrt((double)var[k] + (double)eps), mu = mean[k];
        for (int64_t i = 0; i < hw; i++) x[k * hw + i] = (float)(x[k * hw + i] * sd + mu);
    }
}

void fx_bn_normalize(float *x, int c, int64_t hw, const float *mean, const float *var, float eps) {
    for (int k = 0; k < c; k++) {
        double sd = sqrt((double)var[k] + (double)eps), mu = mean[k];
        for (int64_t i = 0; i < hw; i++) x[k * hw + i] = (float)((x[k * hw + i] - mu) / sd);
    }
}

void fx_image_to_rgb8(const float *chw, int height, int width, uint8_t *rgb) {
    int64_t hw = (int64_t)height * width;
    for (int64_t i = 0; i < hw; i++)
        for (int ch = 0; ch < 3; ch++) {
            float v = chw[ch * hw + i] * 0.5f + 0.5f; /* x/2 + 0.5 as diffusers, exact halving */
            if (!(v > 0.0f)) v = 0.0f; /* also NaN */
            if (v > 1.0f) v = 1.0f;
            rgb[i * 3 + ch] = (uint8_t)lrintf(v * 255.0f);
        }
}

void fx_latents_noised(const float *x0, const float *noise, float sigma, int64_t n, float *out) {
    const float keep = 1.0f - sigma;
    for (int64_t i = 0; i < n; i++) out[i] = sigma * noise[i] + keep * x0[i];
}

void fx_latents_blend(float *x, const float *keep, const float *m, int64_t tokens, int c) {
    for (int64_t t = 0; t < tokens; t++) {
        const float mt = m[t], kt = 1.0f - mt;
        float *xt = x + t * c;
        const float *at = keep + t * c;
        for (int k = 0; k < c; k++) xt[k] = kt * at[k] + mt * xt[k];
    }
}
