/*
 * quantize_k.c — reference quantizers of the K-quants (256-element
 * super-blocks): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
 *
 * These reproduce ggml's quantize_row_q{2,3,4,5,6}_K_ref (what
 * llama-quantize does without an importance matrix) bit for bit: the same
 * searches, with every f32 operation in the same order (this file is built
 * with -ffp-contract=off; x86-64 and aarch64 evaluate float in float).
 * Per super-block:
 *   1. each sub-block gets a scale (and, for the asymmetric types, a min)
 *      from a small search minimising a weighted error (below);
 *   2. the sub-block scales (mins) are quantized to 4/6/8-bit codes
 *      relative to the largest one, which becomes the f16 super-block
 *      scale d (dmin);
 *   3. every element is re-quantized with its sub-block's *decoded* scale
 *      and min (f16 d times the code), so the codes match what a reader
 *      reconstructs.
 * round_nearest is round-half-to-even through the 1.5·2²³ trick, as ggml.
 */
#include "quant_ref.h"

#include <math.h>

#define GROUP_EPS 1e-15f /* below this a group's largest |x| counts as all zero */

static inline int round_nearest(float f) {
    float v = f + 12582912.0f; /* 1.5·2²³: the sum's low mantissa bits hold f rounded to even */
    uint32_t u;
    memcpy(&u, &v, 4);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------------ */
/* Sub-block searches                                                       */
/* ------------------------------------------------------------------------ */

/* Asymmetric fit x ≈ scale·L + min, L in [0, nmax], min <= 0, minimising
 * Σ w·err (err = |diff| with use_mad, else diff²): start from the full
 * range, then try nstep + 1 scales (rmin + rdelta·is + nmax)/(max − min),
 * each with the weighted least-squares (scale, min) for its codes. Returns
 * the scale; *neg_min = −min. (ggml make_qkx2_quants.) */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                           uint8_t *laux, float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float wi = w[i];
        sum_w += wi;
        float wx = wi * x[i];
        sum_x += wx;
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(round_nearest(iscale * (x[i] - min)), 0, nmax);
        float t = scale * (float)L[i];
        float diff = t + min;
        diff = diff - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float e = w[i] * diff;
        best_error += e;
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        float num = rdelta * (float)is;
        num = rmin + num;
        num = num + (float)nmax;
        iscale = num / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(round_nearest(iscale * (x[i] - min)), 0, nmax);
            laux[i] = (uint8_t)l;
            float wl = w[i] * (float)l;
            sum_l += wl;
            float wll = wl * (float)l;
            sum_l2 += wll;
            float wlx = wl * x[i];
            sum_xl += wlx;
        }
        float a = sum_w * sum_l2, b = sum_l * sum_l;
        float D = a - b;
        if (D > 0) {
            float p = sum_w * sum_xl, q = sum_x * sum_l;
            float this_scale = (p - q) / D;
            float r = sum_l2 * sum_x, s = sum_l * sum_xl;
            float this_min = (r - s) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float t = this_scale * (float)laux[i];
                float diff = t + this_min;
                diff = diff - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float e = w[i] * diff;
                cur_error += e;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

/* The element of largest |x| (first on ties) and that magnitude. */
static float signed_absmax(int n, const float *x, float *amax_out) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    *amax_out = amax;
    return max;
}

/* Codes l = clamp(round(iscale·x), −nmax, nmax − 1) with weights x²: the
 * sums Σ w·x·l and Σ w·l² (each product rounded as written). With L, the
 * codes are stored there plus `offset`. */
static void sym_codes(int n, int nmax, const float *x, float iscale, int8_t *L, int offset, float *sumlx_out,
                      float *suml2_out) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(round_nearest(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)(l + offset);
        float w = x[i] * x[i];
        float wx = w * x[i];
        float wxl = wx * (float)l;
        sumlx += wxl;
        float wl = w * (float)l;
        float wll = wl * (float)l;
        suml2 += wll;
    }
    *sumlx_out = sumlx, *suml2_out = suml2;
}

/* Symmetric fit with weights x², codes L + nmax for L in [−nmax, nmax−1]:
 * from iscale = −nmax/max, then 18 perturbed scales −(nmax + 0.1·is)/max
 * (is = ±1..±9), keeping the one with the largest (Σ w·x·l)²/Σ w·l². Returns
 * the scale. (ggml make_qx_quants with rmse_type 1, no weights.) */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = signed_absmax(n, x, &amax);
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx, suml2;
    sym_codes(n, nmax, x, iscale, L, nmax, &sumlx, &suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float t = 0.1f * (float)is;
        t = (float)nmax + t;
        iscale = -t / max;
        sym_codes(n, nmax, x, iscale, NULL, 0, &sumlx, &suml2);
        float lhs = sumlx * sumlx, rhs = best * suml2;
        if (suml2 > 0 && lhs > rhs) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(round_nearest(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit for Q3_K (nmax 4, weights x²): codes from −nmax/max, then
 * up to 5 rounds of coordinate descent moving single codes when that
 * raises (Σ w·x·l)²/Σ w·l². Codes L + nmax. (ggml make_q3_quants, do_rmse.) */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = signed_absmax(n, x, &amax);
    if (amax < GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float sumlx, suml2;
    sym_codes(n, nmax, x, (float)-nmax / max, L, 0, &sumlx, &suml2);
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float wx = w * x[i];
            float wxl = wx * (float)L[i];
            float slx = sumlx - wxl;
            if (slx > 0) {
                float wl = w * (float)L[i];
                float wll = wl * (float)L[i];
                float sl2 = suml2 - wll;
                float xs = x[i] * sl2;
                int new_l = clampi(round_nearest(xs / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    float wxn = wx * (float)new_l;
                    slx += wxn;
                    float wn = w * (float)new_l;
                    float wnn = wn * (float)new_l;
                    sl2 += wnn;
                    float a = slx * slx;
                    a = a * suml2;
                    float b = sumlx * sumlx;
                    b = b * sl2;
                    if (sl2 > 0 && a > b) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Pack 2-bit codes L[256] the Q2_K/Q3_K way: byte 32h + l holds elements
 * 128h + l + 32t in bits 2t..2t+1. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *e = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(e[0] | e[32] << 2 | e[64] << 4 | e[96] << 6);
        }
}

/* The final codes: sub-block j (n elements) of a super-block, when its
 * decoded scale d[j] is not 0, gets L = clamp(round((x + dm[j]) / d[j]), lo,
 * hi) + off (types without mins pass dm = 0: x + 0 rounds to the same
 * code); the other sub-blocks keep the search's codes. */
void fx_kquant_requant_ref(const float *x, int nsub, int n, const float *d, const float *dm, int lo, int hi, int off,
                           uint8_t *L) {
    for (int j = 0; j < nsub; j++) {
        if (d[j] == 0) continue;
        for (int l = 0; l < n; l++) {
            float v = x[n * j + l] + dm[j];
            L[n * j + l] = (uint8_t)(clampi(round_nearest(v / d[j]), lo, hi) + off);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Q2_K: 16 sub-blocks of 16, 2-bit codes, 4-bit scales and mins            */
/* ------------------------------------------------------------------------ */

void fx_q2k_search_ref(const float *x, float scales[16], float mins[16], uint8_t L[256]) {
    uint8_t laux[16];
    float w[16];
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
        scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], laux, -0.5f, 0.1f, 15, 1);
    }
}

void fx_q2k_codes(const float scales[16], const float mins[16], uint8_t *y, float d[16], float dm[16]) {
    uint8_t *sc = y;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
        float iscale = 15.0f / max_scale;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)round_nearest(iscale * scales[j]);
        fx_q_put_f16(y + 80, max_scale / 15.0f);
    } else {
        for (int j = 0; j < 16; j++) sc[j] = 0;
        fx_q_put_f16(y + 80, 0.0f);
    }
    if (max_min > 0) {
        float iscale = 15.0f / max_min;
        for (int j = 0; j < 16; j++) sc[j] |= (uint8_t)((unsigned)round_nearest(iscale * mins[j]) << 4);
        fx_q_put_f16(y + 82, max_min / 15.0f);
    } else {
        fx_q_put_f16(y + 82, 0.0f);
    }
    const float d_all = fx_q_f16(y + 80), dmin_all = fx_q_f16(y + 82);
    for (int j = 0; j < 16; j++) {
        d[j] = d_all * (float)(sc[j] & 15);
        dm[j] = dmin_all * (float)(sc[j] >> 4);
    }
}

void fx_q2k_pack(const uint8_t L[256], uint8_t *y) { pack_2bit(L, y + 16); }

/* ------------------------------------------------------------------------ */
/* Q3_K: 16 sub-blocks of 16, 3-bit codes (2 bits + hmask), 6-bit scales    */
/* ------------------------------------------------------------------------ */

void fx_q3k_search_ref(const float *x, float scales[16], uint8_t L[256]) {
    for (int j = 0; j < 16; j++) scales[j] = fit_scale_q3(16, 4, x + 16 * j, (int8_t *)L + 16 * j);
}

void fx_q3k_codes(const float scales[16], uint8_t *y, float d[16]) {
    uint8_t *sc = y + 96;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        float a = fabsf(scales[j]);
        if (a > amax) amax = a, max_scale = scales[j];
    }
    memset(sc, 0, 12);
    if (max_scale != 0) {
        float iscale = -32.0f / max_scale;
        for (int j = 0; j < 16; j++) {
            int8_t l = (int8_t)round_nearest(iscale * scales[j]);
            l = (int8_t)(clampi(l, -32, 31) + 32);
            if (j < 8) sc[j] = (uint8_t)(l & 15);
            else sc[j - 8] |= (uint8_t)((l & 15) << 4);
            l = (int8_t)(l >> 4);
            sc[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
        }
        fx_q_put_f16(y + 108, 1 / iscale);
    } else {
        fx_q_put_f16(y + 108, 0.0f);
    }
    int8_t s6[16];
    fx_q3k_scales(sc, s6);
    const float d_all = fx_q_f16(y + 108);
    for (int j = 0; j < 16; j++) d[j] = d_all * (float)s6[j];
}

void fx_q3k_pack(const uint8_t L[256], uint8_t *y) {
    /* code >= 4: its hmask bit set (bit ⌊e/32⌋ of hmask[e mod 32]), 2 low bits kept */
    uint8_t low[256], *hmask = y;
    memset(hmask, 0, 32);
    for (int e = 0; e < 256; e++) {
        int v = L[e];
        if (v > 3) {
            hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            v -= 4;
        }
        low[e] = (uint8_t)v;
    }
    pack_2bit(low, y + 32);
}

/* ------------------------------------------------------------------------ */
/* Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scales and mins                   */
/* ------------------------------------------------------------------------ */

void fx_q45k_search_ref(const float *x, int nmax, float scales[8], float mins[8], uint8_t L[256]) {
    uint8_t laux[32];
    float w[32];
    const float rmin = nmax == 15 ? -1.0f : -0.5f;
    const int nstep = nmax == 15 ? 20 : 15;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) {
            float sq = xs[l] * xs[l];
            sum_x2 += sq;
        }
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], laux, rmin, 0.1f, nstep, 0);
    }
}

void fx_q45k_codes(const float scales[8], const float mins[8], uint8_t *y, float d[8], float dm[8]) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t *s = y + 4;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)round_nearest(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)round_nearest(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    fx_q_put_f16(y, max_scale / 63.0f);
    fx_q_put_f16(y + 2, max_min / 63.0f);
    const float d_all = fx_q_f16(y), dmin_all = fx_q_f16(y + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        fx_q_scale_min_k4(j, s, &sc, &mn);
        d[j] = d_all * (float)sc;
        dm[j] = dmin_all * (float)mn;
    }
}

void fx_q4k_pack(const uint8_t L[256], uint8_t *y) {
    uint8_t *qs = y + 16; /* sub-blocks 2c (low nibbles) and 2c + 1 (high) share 32 bytes */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

void fx_q5k_pack(const uint8_t L[256], uint8_t *y) {
    uint8_t *qh = y + 16, *qs = y + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            if (lo > 15) lo -= 16, qh[l] |= (uint8_t)(1u << (2 * c));
            if (hi > 15) hi -= 16, qh[l] |= (uint8_t)(2u << (2 * c));
            qs[32 * c + l] = (uint8_t)(lo | hi << 4);
        }
}

/* ------------------------------------------------------------------------ */
/* Q6_K: 16 sub-blocks of 16, 6-bit codes, int8 scales                      */
/* ------------------------------------------------------------------------ */

void fx_q6k_search_ref(const float *x, float scales[16], uint8_t L[256]) {
    for (int j = 0; j < 16; j++) scales[j] = fit_scale_sym(16, 32, x + 16 * j, (int8_t *)L + 16 * j);
}

int fx_q6k_codes(const float scales[16], uint8_t *y, float d[16]) {
    int8_t *sc = (int8_t *)(y + 192);
    float max_scale = 0, max_abs_scale = 0;
    for (int j = 0; j < 16; j++) {
        float a = fabsf(scales[j]);
        if (a > max_abs_scale) max_abs_scale = a, max_scale = scales[j];
    }
    if (max_abs_scale < GROUP_EPS) {
        memset(y, 0, 210);
        return 0;
    }
    float iscale = -128.0f / max_scale;
    fx_q_put_f16(y + 208, 1 / iscale);
    for (int j = 0; j < 16; j++) {
        int v = round_nearest(iscale * scales[j]);
        sc[j] = (int8_t)(v < 127 ? v : 127);
    }
    const float d_all = fx_q_f16(y + 208);
    for (int j = 0; j < 16; j++) d[j] = d_all * (float)sc[j];
    return 1;
}

void fx_q6k_pack(const uint8_t L[256], uint8_t *y) {
    uint8_t *ql = y, *qh = y + 128;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *e = L + 128 * h + l;
            ql[64 * h + l] = (uint8_t)((e[0] & 15) | (e[64] & 15) << 4);
            ql[64 * h + 32 + l] = (uint8_t)((e[32] & 15) | (e[96] & 15) << 4);
            qh[32 * h + l] = (uint8_t)((e[0] >> 4) | (e[32] >> 4) << 2 | (e[64] >> 4) << 4 | (e[96] >> 4) << 6);
        }
}

/* ------------------------------------------------------------------------ */
/* The reference quantizers: the three steps per super-block                */
/* ------------------------------------------------------------------------ */

static const float no_mins[16];

void fx_quant_ref_k(fx_dtype t, const float *x, int64_t nb, uint8_t *y) {
    const size_t bytes = fx_dtype_block_bytes(t);
    uint8_t L[256];
    float scales[16], mins[16], d[16], dm[16];
    for (int64_t i = 0; i < nb; i++, x += 256, y += bytes) {
        switch (t) {
        case FX_DTYPE_Q2_K:
            fx_q2k_search_ref(x, scales, mins, L);
            fx_q2k_codes(scales, mins, y, d, dm);
            fx_kquant_requant_ref(x, 16, 16, d, dm, 0, 3, 0, L);
            fx_q2k_pack(L, y);
            break;
        case FX_DTYPE_Q3_K:
            fx_q3k_search_ref(x, scales, L);
            fx_q3k_codes(scales, y, d);
            fx_kquant_requant_ref(x, 16, 16, d, no_mins, -4, 3, 4, L);
            fx_q3k_pack(L, y);
            break;
        case FX_DTYPE_Q4_K:
        case FX_DTYPE_Q5_K: {
            const int nmax = t == FX_DTYPE_Q4_K ? 15 : 31;
            fx_q45k_search_ref(x, nmax, scales, mins, L);
            fx_q45k_codes(scales, mins, y, d, dm);
            fx_kquant_requant_ref(x, 8, 32, d, dm, 0, nmax, 0, L);
            if (t == FX_DTYPE_Q4_K) fx_q4k_pack(L, y);
            else fx_q5k_pack(L, y);
            break;
        }
        default:
            fx_q6k_search_ref(x, scales, L);
            if (!fx_q6k_codes(scales, y, d)) break;
            fx_kquant_requant_ref(x, 16, 16, d, no_mins, -32, 31, 32, L);
            fx_q6k_pack(L, y);
            break;
        }
    }
}
