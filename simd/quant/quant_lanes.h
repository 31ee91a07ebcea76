/*
 * quant_lanes.h — the vector quantizers, written once for any lane count
 * and included by quantize_<isa>.c after it defines the small vector
 * vocabulary below. Byte-identical to the scalar reference (quantize.c,
 * quantize_k.c): every lane performs exactly the reference's sequence of
 * f32 operations (separate multiplies and adds, this folder is built with
 * -ffp-contract=off; IEEE division and square root; the same 1.5·2²³
 * round-to-even trick), so only the grouping of independent work changes:
 *
 *   - K-quants: the sub-block searches (make_qkx2_quants-, make_qx_quants-
 *     and make_q3_quants-style) run QL sub-blocks side by side, lane k
 *     fitting sub-block k over its elements in the reference's order; a
 *     lane's data-dependent branches become masks (a lane that stopped
 *     improving just keeps its state). Codes are recomputed at the end from
 *     the winning scale, which gives the codes the reference kept. The
 *     super-block fields come from the shared scalar code (quant_ref.h);
 *     the final re-quantization is vectorized over elements.
 *   - 32-element blocks: QL elements at a time; maxima and minima are
 *     exact in any order for finite values, and the element the reference
 *     keeps (the first of equal ones) is found by comparison, so the sign
 *     of a zero comes out as there.
 *
 * Inputs are finite (flux quantize rejects NaN and infinities first).
 *
 * Vocabulary (static inline, defined before inclusion):
 *   QL lanes; vf / vi / vm: f32 vector, i32 vector, lane mask;
 *   vf_set1 vf_load vf_store vf_add vf_sub vf_mul vf_div vf_sqrt vf_abs
 *   vf_neg (sign flip) vf_trunc (toward zero) vf_hmax vf_hmin (reductions);
 *   vf_lt vf_gt vf_ge vf_eq vf_ne (C's comparisons) → vm; vf_sel(m, a, b)
 *   = m ? b : a; vm_and vm_or vm_andnot(a, b) = a & ~b, vm_any, vm_bits
 *   (lane k → bit k); vi_set1 vi_add vi_sub vi_and vi_or vi_slli vi_min vi_max vi_ne vi_nz
 *   vi_sel vi_of_bits (reinterpret a vf) vi_cvtt (truncating conversion)
 *   vi_to_vf; vi_store_u8 (the low byte of each lane to QL bytes);
 *   QNAME(name) → the exported name of a quantizer.
 */
#ifndef FX_QUANT_LANES_H
#define FX_QUANT_LANES_H

#include "quant_ref.h"

#define GROUP_EPS 1e-15f /* as quantize_k.c */

/* ggml's nearest_int: the low mantissa bits of f + 1.5·2²³ */
static inline vi rn(vf f) {
    vi u = vi_of_bits(vf_add(f, vf_set1(12582912.0f)));
    return vi_sub(vi_and(u, vi_set1(0x007fffff)), vi_set1(0x00400000));
}

static inline vi clampv(vi v, int lo, int hi) { return vi_min(vi_max(v, vi_set1(lo)), vi_set1(hi)); }

/* x[QL][n] (sub-block k at x + k·n) → xt[n][QL] */
static inline void transpose_in(const float *x, int n, float *xt) {
    for (int k = 0; k < QL; k++)
        for (int i = 0; i < n; i++) xt[i * QL + k] = x[k * n + i];
}

/* ------------------------------------------------------------------------ */
/* Searches, lane k = sub-block k                                           */
/* ------------------------------------------------------------------------ */

/* fit_scale_min (quantize_k.c) for QL sub-blocks of n: xt, wt [n][QL];
 * scale, neg_min [QL]; L [QL][n]. */
static void lanes_fit_min(int n, int nmax, const float *xt, const float *wt, float rmin, float rdelta, int nstep,
                          int use_mad, float *scale_out, float *neg_min_out, uint8_t *L) {
    const vf zero = vf_set1(0.0f);
    vf min = vf_load(xt), max = min;
    vf sum_w = vf_load(wt);
    vf sum_x = vf_mul(sum_w, min);
    for (int i = 1; i < n; i++) {
        vf x = vf_load(xt + i * QL), w = vf_load(wt + i * QL);
        min = vf_sel(vf_lt(x, min), min, x);
        max = vf_sel(vf_gt(x, max), max, x);
        sum_w = vf_add(sum_w, w);
        sum_x = vf_add(sum_x, vf_mul(w, x));
    }
    min = vf_sel(vf_gt(min, zero), min, zero);
    const vm flat = vf_eq(max, min); /* the reference returns scale 0, codes 0 */
    vf iscale = vf_div(vf_set1((float)nmax), vf_sub(max, min));
    vf scale = vf_div(vf_set1(1.0f), iscale);
    vf best = zero;
    for (int i = 0; i < n; i++) {
        vf x = vf_load(xt + i * QL), w = vf_load(wt + i * QL);
        vi l = clampv(rn(vf_mul(iscale, vf_sub(x, min))), 0, nmax);
        vf diff = vf_add(vf_mul(scale, vi_to_vf(l)), min);
        diff = vf_sub(diff, x);
        diff = use_mad ? vf_abs(diff) : vf_mul(diff, diff);
        best = vf_add(best, vf_mul(w, diff));
    }
    vf l_iscale = iscale, l_min = min; /* what the kept codes were computed with */
    vf lf[32];
    for (int is = 0; nstep >= 1 && is <= nstep; is++) {
        float num = rdelta * (float)is;
        num = rmin + num;
        num = num + (float)nmax;
        iscale = vf_div(vf_set1(num), vf_sub(max, min));
        vf sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; i++) {
            vf x = vf_load(xt + i * QL), w = vf_load(wt + i * QL);
            lf[i] = vi_to_vf(clampv(rn(vf_mul(iscale, vf_sub(x, min))), 0, nmax));
            vf wl = vf_mul(w, lf[i]);
            sum_l = vf_add(sum_l, wl);
            sum_l2 = vf_add(sum_l2, vf_mul(wl, lf[i]));
            sum_xl = vf_add(sum_xl, vf_mul(wl, x));
        }
        vf D = vf_sub(vf_mul(sum_w, sum_l2), vf_mul(sum_l, sum_l));
        vm ok = vm_andnot(vf_gt(D, zero), flat);
        if (!vm_any(ok)) continue;
        vf this_scale = vf_div(vf_sub(vf_mul(sum_w, sum_xl), vf_mul(sum_x, sum_l)), D);
        vf this_min = vf_div(vf_sub(vf_mul(sum_l2, sum_x), vf_mul(sum_l, sum_xl)), D);
        vm pos = vf_gt(this_min, zero);
        this_min = vf_sel(pos, this_min, zero);
        this_scale = vf_sel(pos, this_scale, vf_div(sum_xl, sum_l2));
        vf cur = zero;
        for (int i = 0; i < n; i++) {
            vf x = vf_load(xt + i * QL), w = vf_load(wt + i * QL);
            vf diff = vf_add(vf_mul(this_scale, lf[i]), this_min);
            diff = vf_sub(diff, x);
            diff = use_mad ? vf_abs(diff) : vf_mul(diff, diff);
            cur = vf_add(cur, vf_mul(w, diff));
        }
        vm better = vm_and(ok, vf_lt(cur, best));
        l_iscale = vf_sel(better, l_iscale, iscale);
        l_min = vf_sel(better, l_min, min);
        best = vf_sel(better, best, cur);
        scale = vf_sel(better, scale, this_scale);
        min = vf_sel(better, min, this_min);
    }
    vf_store(scale_out, vf_sel(flat, scale, zero));
    vf_store(neg_min_out, vf_neg(min));
    uint8_t lt[32 * QL];
    for (int i = 0; i < n; i++) {
        vi l = clampv(rn(vf_mul(l_iscale, vf_sub(vf_load(xt + i * QL), l_min))), 0, nmax);
        vi_store_u8(lt + i * QL, vi_sel(flat, l, vi_set1(0)));
    }
    for (int k = 0; k < QL; k++)
        for (int i = 0; i < n; i++) L[k * n + i] = lt[i * QL + k];
}

/* The signed element of largest |x| per lane (first on ties) and that |x|. */
static inline vf lanes_signed_absmax(int n, const float *xt, vf *amax_out) {
    vf amax = vf_set1(0.0f), max = amax;
    for (int i = 0; i < n; i++) {
        vf x = vf_load(xt + i * QL), ax = vf_abs(x);
        vm m = vf_gt(ax, amax);
        amax = vf_sel(m, amax, ax);
        max = vf_sel(m, max, x);
    }
    *amax_out = amax;
    return max;
}

/* sym_codes of quantize_k.c: Σ w·x·l and Σ w·l² for codes of iscale (w, wx
 * = x², x³ per element, rounded as there). */
static inline void lanes_sym_sums(int n, int nmax, const float *xt, const vf *w, const vf *wx, vf iscale, vf *sumlx,
                                  vf *suml2) {
    vf slx = vf_set1(0.0f), sl2 = slx;
    for (int i = 0; i < n; i++) {
        vf l = vi_to_vf(clampv(rn(vf_mul(iscale, vf_load(xt + i * QL))), -nmax, nmax - 1));
        slx = vf_add(slx, vf_mul(wx[i], l));
        sl2 = vf_add(sl2, vf_mul(vf_mul(w[i], l), l));
    }
    *sumlx = slx, *suml2 = sl2;
}

/* fit_scale_sym (Q6_K) for QL sub-blocks of n <= 16. */
static void lanes_fit_sym(int n, int nmax, const float *xt, float *scale_out, uint8_t *L) {
    const vf zero = vf_set1(0.0f);
    vf amax, max = lanes_signed_absmax(n, xt, &amax);
    const vm small = vf_lt(amax, vf_set1(GROUP_EPS));
    vf w[16], wx[16];
    for (int i = 0; i < n; i++) {
        vf x = vf_load(xt + i * QL);
        w[i] = vf_mul(x, x);
        wx[i] = vf_mul(w[i], x);
    }
    vf iscale = vf_div(vf_set1((float)-nmax), max), sumlx, suml2;
    lanes_sym_sums(n, nmax, xt, w, wx, iscale, &sumlx, &suml2);
    vf scale = vf_sel(vf_ne(suml2, zero), zero, vf_div(sumlx, suml2));
    vf best = vf_mul(scale, sumlx), l_iscale = iscale;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float t = 0.1f * (float)is;
        t = (float)nmax + t;
        iscale = vf_div(vf_set1(-t), max);
        lanes_sym_sums(n, nmax, xt, w, wx, iscale, &sumlx, &suml2);
        vm better = vm_and(vf_gt(suml2, zero), vf_gt(vf_mul(sumlx, sumlx), vf_mul(best, suml2)));
        if (!vm_any(better)) continue;
        vf s = vf_div(sumlx, suml2);
        l_iscale = vf_sel(better, l_iscale, iscale);
        scale = vf_sel(better, scale, s);
        best = vf_sel(better, best, vf_mul(s, sumlx));
    }
    vf_store(scale_out, vf_sel(small, scale, zero));
    uint8_t lt[16 * QL];
    for (int i = 0; i < n; i++) {
        vi l = vi_add(clampv(rn(vf_mul(l_iscale, vf_load(xt + i * QL))), -nmax, nmax - 1), vi_set1(nmax));
        vi_store_u8(lt + i * QL, vi_sel(small, l, vi_set1(0)));
    }
    for (int k = 0; k < QL; k++)
        for (int i = 0; i < n; i++) L[k * n + i] = lt[i * QL + k];
}

/* fit_scale_q3 (Q3_K) for QL sub-blocks of n <= 16: the coordinate descent
 * runs until no lane moves a code (a lane whose round changed nothing
 * would change nothing in the next one either, so running it on is the
 * reference's early stop). */
static void lanes_fit_q3(int n, int nmax, const float *xt, float *scale_out, uint8_t *L) {
    const vf zero = vf_set1(0.0f);
    vf amax, max = lanes_signed_absmax(n, xt, &amax);
    const vm small = vf_lt(amax, vf_set1(GROUP_EPS));
    vf w[16], wx[16];
    vi l[16];
    const vf iscale = vf_div(vf_set1((float)-nmax), max);
    vf sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        vf x = vf_load(xt + i * QL);
        w[i] = vf_mul(x, x);
        wx[i] = vf_mul(w[i], x);
        l[i] = clampv(rn(vf_mul(iscale, x)), -nmax, nmax - 1);
        vf lf = vi_to_vf(l[i]);
        sumlx = vf_add(sumlx, vf_mul(wx[i], lf));
        suml2 = vf_add(suml2, vf_mul(vf_mul(w[i], lf), lf));
    }
    for (int itry = 0; itry < 5; itry++) {
        vm changed = vf_ne(zero, zero);
        for (int i = 0; i < n; i++) {
            vf x = vf_load(xt + i * QL), lf = vi_to_vf(l[i]);
            vf slx = vf_sub(sumlx, vf_mul(wx[i], lf));
            vm m = vf_gt(slx, zero);
            vf sl2 = vf_sub(suml2, vf_mul(vf_mul(w[i], lf), lf));
            vi new_l = clampv(rn(vf_div(vf_mul(x, sl2), slx)), -nmax, nmax - 1);
            m = vm_and(m, vi_ne(new_l, l[i]));
            if (!vm_any(m)) continue;
            vf nf = vi_to_vf(new_l);
            slx = vf_add(slx, vf_mul(wx[i], nf));
            sl2 = vf_add(sl2, vf_mul(vf_mul(w[i], nf), nf));
            vf a = vf_mul(vf_mul(slx, slx), suml2), b = vf_mul(vf_mul(sumlx, sumlx), sl2);
            m = vm_and(m, vm_and(vf_gt(sl2, zero), vf_gt(a, b)));
            l[i] = vi_sel(m, l[i], new_l);
            sumlx = vf_sel(m, sumlx, slx);
            suml2 = vf_sel(m, suml2, sl2);
            changed = vm_or(changed, m);
        }
        if (!vm_any(changed)) break;
    }
    vf scale = vf_sel(vf_gt(suml2, zero), zero, vf_div(sumlx, suml2));
    vf_store(scale_out, vf_sel(small, scale, zero));
    uint8_t lt[16 * QL];
    for (int i = 0; i < n; i++) vi_store_u8(lt + i * QL, vi_sel(small, vi_add(l[i], vi_set1(nmax)), vi_set1(0)));
    for (int k = 0; k < QL; k++)
        for (int i = 0; i < n; i++) L[k * n + i] = lt[i * QL + k];
}

/* ------------------------------------------------------------------------ */
/* K-quant super-blocks                                                     */
/* ------------------------------------------------------------------------ */

/* fx_kquant_requant_ref over QL elements at a time (n a multiple of QL). */
static void requant_lanes(const float *x, int nsub, int n, const float *d, const float *dm, int lo, int hi, int off,
                          uint8_t *L) {
    for (int j = 0; j < nsub; j++) {
        if (d[j] == 0) continue;
        const vf vd = vf_set1(d[j]), vdm = vf_set1(dm[j]);
        for (int l = 0; l < n; l += QL) {
            vf v = vf_add(vf_load(x + n * j + l), vdm);
            vi_store_u8(L + n * j + l, vi_add(clampv(rn(vf_div(v, vd)), lo, hi), vi_set1(off)));
        }
    }
}

enum { KQ2, KQ3, KQ4, KQ5, KQ6 };

/* The searches of `count` (a multiple of QL) consecutive sub-blocks of n
 * elements of super-blocks x: scales, mins, codes L (count · n). */
static void search_subblocks(int type, const float *x, int count, float *scales, float *mins, uint8_t *L) {
    const int n = type == KQ4 || type == KQ5 ? 32 : 16;
    float xt[32 * QL], wt[32 * QL];
    for (int s = 0; s < count; s += QL, x += QL * n, L += QL * n) {
        transpose_in(x, n, xt);
        switch (type) {
        case KQ2:
            for (int i = 0; i < n * QL; i++) wt[i] = fabsf(xt[i]);
            lanes_fit_min(n, 3, xt, wt, -0.5f, 0.1f, 15, 1, scales + s, mins + s, L);
            break;
        case KQ4:
        case KQ5: {
            vf sum_x2 = vf_set1(0.0f);
            for (int i = 0; i < n; i++) {
                vf v = vf_load(xt + i * QL);
                sum_x2 = vf_add(sum_x2, vf_mul(v, v));
            }
            vf av_x = vf_sqrt(vf_div(sum_x2, vf_set1(32.0f)));
            for (int i = 0; i < n; i++) vf_store(wt + i * QL, vf_add(av_x, vf_abs(vf_load(xt + i * QL))));
            if (type == KQ4) lanes_fit_min(n, 15, xt, wt, -1.0f, 0.1f, 20, 0, scales + s, mins + s, L);
            else lanes_fit_min(n, 31, xt, wt, -0.5f, 0.1f, 15, 0, scales + s, mins + s, L);
            break;
        }
        case KQ3: lanes_fit_q3(n, 4, xt, scales + s, L); break;
        default: lanes_fit_sym(n, 32, xt, scales + s, L); break;
        }
    }
}

static const float no_mins_lanes[16];

/* Super-blocks [0, nb) of one K type: the searches of whole lane groups
 * (a last group short of sub-blocks repeats the last super-block), then
 * per super-block the shared fields, the re-quantization and the packing. */
static void quant_k(int type, const float *x, int64_t nb, uint8_t *y) {
    const int n = type == KQ4 || type == KQ5 ? 32 : 16, per = 256 / n;
    const int group = QL > per ? QL / per : 1; /* super-blocks per search call */
    const size_t bytes = type == KQ2 ? 84 : type == KQ3 ? 110 : type == KQ4 ? 144 : type == KQ5 ? 176 : 210;
    float scales[32], mins[32], d[16], dm[16], pad[2 * 256];
    uint8_t L[2 * 256];
    for (int64_t i = 0; i < nb; i += group) {
        const int g = nb - i < group ? (int)(nb - i) : group;
        const float *xs = x + i * 256;
        if (g < group) { /* QL = 16 and 32-element sub-blocks: one super-block left */
            memcpy(pad, xs, 256 * sizeof *pad);
            memcpy(pad + 256, xs, 256 * sizeof *pad);
            xs = pad;
        }
        search_subblocks(type, xs, group * per < QL ? QL : group * per, scales, mins, L);
        for (int k = 0; k < g; k++) {
            const float *xb = x + (i + k) * 256;
            uint8_t *yb = y + (size_t)(i + k) * bytes, *Lb = L + 256 * k;
            float *sb = scales + per * k, *mb = mins + per * k;
            switch (type) {
            case KQ2:
                fx_q2k_codes(sb, mb, yb, d, dm);
                requant_lanes(xb, 16, 16, d, dm, 0, 3, 0, Lb);
                fx_q2k_pack(Lb, yb);
                break;
            case KQ3:
                fx_q3k_codes(sb, yb, d);
                requant_lanes(xb, 16, 16, d, no_mins_lanes, -4, 3, 4, Lb);
                fx_q3k_pack(Lb, yb);
                break;
            case KQ4:
            case KQ5:
                fx_q45k_codes(sb, mb, yb, d, dm);
                requant_lanes(xb, 8, 32, d, dm, 0, type == KQ4 ? 15 : 31, 0, Lb);
                if (type == KQ4) fx_q4k_pack(Lb, yb);
                else fx_q5k_pack(Lb, yb);
                break;
            default:
                if (!fx_q6k_codes(sb, yb, d)) break;
                requant_lanes(xb, 16, 16, d, no_mins_lanes, -32, 31, 32, Lb);
                fx_q6k_pack(Lb, yb);
                break;
            }
        }
    }
}

void QNAME(q2_k)(const float *x, int64_t nb, uint8_t *y) { quant_k(KQ2, x, nb, y); }
void QNAME(q3_k)(const float *x, int64_t nb, uint8_t *y) { quant_k(KQ3, x, nb, y); }
void QNAME(q4_k)(const float *x, int64_t nb, uint8_t *y) { quant_k(KQ4, x, nb, y); }
void QNAME(q5_k)(const float *x, int64_t nb, uint8_t *y) { quant_k(KQ5, x, nb, y); }
void QNAME(q6_k)(const float *x, int64_t nb, uint8_t *y) { quant_k(KQ6, x, nb, y); }

/* ------------------------------------------------------------------------ */
/* 32-element blocks, QL elements at a time                                 */
/* ------------------------------------------------------------------------ */

#define NV (32 / QL) /* vectors per block */

/* The first element equal to v (the one the reference's strict
 * comparisons keep). */
static inline float first_equal(const vf *x, vf v, int absolute) {
    for (int k = 0; k < NV; k++) {
        unsigned bits = vm_bits(vf_eq(absolute ? vf_abs(x[k]) : x[k], v));
        if (bits) {
            float e[QL];
            vf_store(e, x[k]);
            return e[__builtin_ctz(bits)];
        }
    }
    return 0.0f;
}

/* The element of largest magnitude (first on ties), 0 for an all-zero block. */
static inline float block_signed_absmax(const vf *x) {
    vf a = vf_abs(x[0]);
    for (int k = 1; k < NV; k++) a = vf_sel(vf_gt(vf_abs(x[k]), a), a, vf_abs(x[k]));
    float amax = vf_hmax(a);
    return amax == 0.0f ? 0.0f : first_equal(x, vf_set1(amax), 1);
}

static inline void block_min_max(const vf *x, float *mn, float *mx) {
    vf lo = x[0], hi = x[0];
    for (int k = 1; k < NV; k++) lo = vf_sel(vf_lt(x[k], lo), lo, x[k]), hi = vf_sel(vf_gt(x[k], hi), hi, x[k]);
    *mn = first_equal(x, vf_set1(vf_hmin(lo)), 0);
    *mx = first_equal(x, vf_set1(vf_hmax(hi)), 0);
}

static inline void load_block(const float *x, vf *v) {
    for (int k = 0; k < NV; k++) v[k] = vf_load(x + k * QL);
}

/* roundf: half away from zero */
static inline vf roundf_lanes(vf v) {
    vf t = vf_trunc(v);
    vm up = vf_ge(vf_abs(vf_sub(v, t)), vf_set1(0.5f));
    vf one = vf_sel(vf_lt(v, vf_set1(0.0f)), vf_set1(1.0f), vf_set1(-1.0f));
    return vf_sel(up, t, vf_add(t, one));
}

/* q[32] codes → nibbles (element j low, j + 16 high) at qs; with qh, the
 * 5th bits into the u32 at qh. As the reference: Q4 codes are or-ed
 * unmasked (a negative code, which the 32-bit conversion of an overflowed
 * x·id can give, fills the byte), Q5 codes masked to their nibbles. */
static inline void put_nibbles(const vi *q, uint8_t *qs, uint8_t *qh) {
    for (int k = 0; k < NV / 2; k++) {
        vi lo = q[k], hi = q[k + NV / 2];
        if (qh) lo = vi_and(lo, vi_set1(15)), hi = vi_and(hi, vi_set1(15));
        vi_store_u8(qs + k * QL, vi_or(lo, vi_slli(hi, 4)));
    }
    if (qh) {
        uint32_t hb = 0;
        for (int k = 0; k < NV; k++) hb |= (uint32_t)vm_bits(vi_nz(vi_and(q[k], vi_set1(16)))) << (k * QL);
        memcpy(qh, &hb, 4);
    }
}

void QNAME(q8_0)(const float *x, int64_t nb, uint8_t *b) {
    vf v[NV];
    for (int64_t i = 0; i < nb; i++, x += 32, b += 34) {
        load_block(x, v);
        vf a = vf_abs(v[0]);
        for (int k = 1; k < NV; k++) a = vf_sel(vf_gt(vf_abs(v[k]), a), a, vf_abs(v[k]));
        const float amax = vf_hmax(a), d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        for (int k = 0; k < NV; k++) vi_store_u8(b + 2 + k * QL, vi_cvtt(roundf_lanes(vf_mul(v[k], vf_set1(id)))));
    }
}

/* The reference's (int8_t) of a float: the low byte of the 32-bit
 * conversion, sign-extended (this decides the code where x·id overflows,
 * e.g. a block of subnormals whose 1/d is infinite). */
static inline vi to_int8(vf v) {
    vi i = vi_cvtt(v);
    return vi_sub(vi_and(i, vi_set1(0xff)), vi_slli(vi_and(i, vi_set1(0x80)), 1));
}

/* Q4_0 / Q5_0: d = max / −(2^(bits−1)), codes trunc(x·id + half + 0.5) ≤ top */
static void quant_sym(const float *x, int64_t nb, uint8_t *b, int five) {
    const size_t bytes = five ? 22 : 18;
    const float div = five ? -16.0f : -8.0f, bias = five ? 16.5f : 8.5f;
    const int top = five ? 31 : 15;
    vf v[NV];
    vi q[NV];
    for (int64_t i = 0; i < nb; i++, x += 32, b += bytes) {
        load_block(x, v);
        const float d = block_signed_absmax(v) / div, id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        for (int k = 0; k < NV; k++)
            q[k] = vi_min(to_int8(vf_add(vf_mul(v[k], vf_set1(id)), vf_set1(bias))), vi_set1(top));
        if (five) put_nibbles(q, b + 6, b + 2);
        else put_nibbles(q, b + 2, NULL);
    }
}

/* Q4_1 / Q5_1: d = (max − min) / (2^bits − 1), codes trunc((x − min)·id + 0.5) */
static void quant_asym(const float *x, int64_t nb, uint8_t *b, int five) {
    const size_t bytes = five ? 24 : 20;
    vf v[NV];
    vi q[NV];
    for (int64_t i = 0; i < nb; i++, x += 32, b += bytes) {
        load_block(x, v);
        float mn, mx;
        block_min_max(v, &mn, &mx);
        const float d = (mx - mn) / (five ? 31.0f : 15.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        fx_q_put_f16(b, d);
        fx_q_put_f16(b + 2, mn);
        for (int k = 0; k < NV; k++) {
            vf t = vf_add(vf_mul(vf_sub(v[k], vf_set1(mn)), vf_set1(id)), vf_set1(0.5f));
            q[k] = five ? vi_cvtt(t) : vi_min(to_int8(t), vi_set1(15)); /* Q5_1: (uint8_t), no clamp, as ggml */
        }
        if (five) put_nibbles(q, b + 8, b + 4);
        else put_nibbles(q, b + 4, NULL);
    }
}

void QNAME(q4_0)(const float *x, int64_t nb, uint8_t *b) { quant_sym(x, nb, b, 0); }
void QNAME(q5_0)(const float *x, int64_t nb, uint8_t *b) { quant_sym(x, nb, b, 1); }
void QNAME(q4_1)(const float *x, int64_t nb, uint8_t *b) { quant_asym(x, nb, b, 0); }
void QNAME(q5_1)(const float *x, int64_t nb, uint8_t *b) { quant_asym(x, nb, b, 1); }

#undef NV

#endif
