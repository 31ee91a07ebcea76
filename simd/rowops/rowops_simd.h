/*
 * rowops_simd.h — the row kernels written once over a small vector
 * vocabulary (vec_avx2.h, vec_avx512.h, vec_neon.h define FX_W lanes,
 * fxv and the V_* operations) and compiled once per ISA by including this
 * file from rowops_<isa>.c. Every ISA therefore runs the same algorithm;
 * only the lane count changes the summation order.
 *
 * Summation order (RMSNorm, LayerNorm, softmax): four vector accumulators
 * take blocks of 4·FX_W elements (accumulator j gets elements
 * [4·FX_W·b + j·FX_W, +FX_W)); the remaining whole vectors go to
 * accumulator 0, then the zero-padded tail to accumulator 1; the result is
 * v_hsum((a0 + a1) + (a2 + a3)), a fixed halving tree. f32 throughout.
 *
 * Tails (n not a multiple of FX_W) go through a FX_W-float stack buffer,
 * padded with a neutral value, so no read or write ever leaves the row.
 *
 * exp: x clamped to [−104, 88.8] (NaN passes through); n = round(x/ln2);
 * r = x − n·ln2 in two FMA steps (ln2 split hi/lo, Cody–Waite);
 * exp(r) = 1 + r + r²·q(r), q a degree-4 polynomial fitted (weighted
 * minimax by tools/fit_exp_poly.py) on |r| <= ln2/2 with a relative
 * approximation error of 3.3e-9; result = p·2^n via v_ldexp (right for
 * subnormal results, +inf above 88.72, 0 below −103.3). Measured: <= 1 ulp
 * over [−103, 88.72] (kernel_rowops_exp_ulp asserts <= 2).
 */

#define EXP_HI 88.8f
#define EXP_LO -104.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f      /* 355/512: n·LN2_HI is exact */
#define LN2_LO -2.12194440e-4f   /* ln2 − LN2_HI */
#define EXP_C2 0.49999994f
#define EXP_C3 0.16666515f
#define EXP_C4 0.041668456f
#define EXP_C5 0.0083694188f
#define EXP_C6 0.0013813145f

static inline fxv v_exp(fxv x) {
    x = V_MAX(V_SET1(EXP_LO), V_MIN(V_SET1(EXP_HI), x));
    fxv n = V_ROUND(V_MUL(x, V_SET1(LOG2E)));
    fxv r = V_FMA(n, V_SET1(-LN2_HI), x);
    r = V_FMA(n, V_SET1(-LN2_LO), r);
    fxv q = V_FMA(V_SET1(EXP_C6), r, V_SET1(EXP_C5));
    q = V_FMA(q, r, V_SET1(EXP_C4));
    q = V_FMA(q, r, V_SET1(EXP_C3));
    q = V_FMA(q, r, V_SET1(EXP_C2));
    fxv p = V_ADD(V_FMA(q, V_MUL(r, r), r), V_SET1(1.0f));
    return v_ldexp(p, n);
}

/* x / (1 + exp(−x)) */
static inline fxv v_silu(fxv x) {
    fxv e = v_exp(V_SUB(V_SET1(0.0f), x));
    return V_DIV(x, V_ADD(V_SET1(1.0f), e));
}

/* Tail helpers: load n < FX_W floats padded with `pad`, store n floats. */
static inline fxv v_load_tail(const float *p, int64_t n, float pad) {
    float b[FX_W];
    for (int i = 0; i < FX_W; i++) b[i] = i < n ? p[i] : pad;
    return V_LOAD(b);
}
static inline void v_store_tail(float *p, fxv v, int64_t n) {
    float b[FX_W];
    V_STORE(b, v);
    for (int64_t i = 0; i < n; i++) p[i] = b[i];
}

/* Σ f(x[i]) in the documented order; f(v, acc) accumulates one vector.
 * pad must make f contribute 0. */
#define V_SUM_ROW(n, x, pad, F, out)                                                   \
    do {                                                                               \
        fxv a0_ = V_SET1(0.0f), a1_ = a0_, a2_ = a0_, a3_ = a0_;                      \
        int64_t i_ = 0;                                                                \
        for (; i_ + 4 * FX_W <= (n); i_ += 4 * FX_W) {                                 \
            a0_ = F(V_LOAD((x) + i_), a0_);                                            \
            a1_ = F(V_LOAD((x) + i_ + FX_W), a1_);                                     \
            a2_ = F(V_LOAD((x) + i_ + 2 * FX_W), a2_);                                 \
            a3_ = F(V_LOAD((x) + i_ + 3 * FX_W), a3_);                                 \
        }                                                                              \
        for (; i_ + FX_W <= (n); i_ += FX_W) a0_ = F(V_LOAD((x) + i_), a0_);           \
        if (i_ < (n)) a1_ = F(v_load_tail((x) + i_, (n) - i_, pad), a1_);              \
        (out) = v_hsum(V_ADD(V_ADD(a0_, a1_), V_ADD(a2_, a3_)));                       \
    } while (0)

#define ACC_SQ(v, acc) V_FMA(v, v, acc)
#define ACC_ADD(v, acc) V_ADD(v, acc)

static void rmsnorm_v(int64_t n, const float *x, const float *w, float eps, float *y) {
    float ss;
    V_SUM_ROW(n, x, 0.0f, ACC_SQ, ss);
    float r = (float)(1.0 / sqrt((double)ss / (double)n + eps));
    fxv vr = V_SET1(r);
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) {
        fxv t = V_MUL(V_LOAD(x + i), vr);
        V_STORE(y + i, w ? V_MUL(t, V_LOAD(w + i)) : t);
    }
    if (i < n) {
        fxv t = V_MUL(v_load_tail(x + i, n - i, 0.0f), vr);
        v_store_tail(y + i, w ? V_MUL(t, v_load_tail(w + i, n - i, 0.0f)) : t, n - i);
    }
}

static void layernorm_modulate_v(int64_t n, const float *x, const float *shift, const float *scale,
                                 float eps, float *y) {
    float s;
    V_SUM_ROW(n, x, 0.0f, ACC_ADD, s);
    float mean = (float)((double)s / (double)n);
    fxv vm = V_SET1(mean);
#define ACC_DEV(v, acc) V_FMA(V_SUB(v, vm), V_SUB(v, vm), acc)
    float var;
    V_SUM_ROW(n, x, mean, ACC_DEV, var); /* tail padded with the mean: adds 0 */
#undef ACC_DEV
    float r = (float)(1.0 / sqrt((double)var / (double)n + eps));
    fxv vr = V_SET1(r), one = V_SET1(1.0f);
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) {
        fxv t = V_MUL(V_SUB(V_LOAD(x + i), vm), vr);
        fxv m = V_MUL(t, V_ADD(one, V_LOAD(scale + i)));
        V_STORE(y + i, V_ADD(m, V_LOAD(shift + i)));
    }
    if (i < n) {
        int64_t k = n - i;
        fxv t = V_MUL(V_SUB(v_load_tail(x + i, k, 0.0f), vm), vr);
        fxv m = V_MUL(t, V_ADD(one, v_load_tail(scale + i, k, 0.0f)));
        v_store_tail(y + i, V_ADD(m, v_load_tail(shift + i, k, 0.0f)), k);
    }
}

static void silu_v(int64_t n, const float *x, float *y) {
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) V_STORE(y + i, v_silu(V_LOAD(x + i)));
    if (i < n) v_store_tail(y + i, v_silu(v_load_tail(x + i, n - i, 0.0f)), n - i);
}

static void swiglu_v(int64_t n, const float *gate, const float *up, float *out) {
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) V_STORE(out + i, V_MUL(v_silu(V_LOAD(gate + i)), V_LOAD(up + i)));
    if (i < n) {
        fxv g = v_silu(v_load_tail(gate + i, n - i, 0.0f));
        v_store_tail(out + i, V_MUL(g, v_load_tail(up + i, n - i, 0.0f)), n - i);
    }
}

/* mul then add (no FMA): bit-identical to the scalar reference */
static void gated_add_v(int64_t n, float *y, const float *gate, const float *x) {
    int64_t i = 0;
    if (gate) {
        for (; i + FX_W <= n; i += FX_W)
            V_STORE(y + i, V_ADD(V_LOAD(y + i), V_MUL(V_LOAD(gate + i), V_LOAD(x + i))));
        if (i < n) {
            int64_t k = n - i;
            fxv t = V_MUL(v_load_tail(gate + i, k, 0.0f), v_load_tail(x + i, k, 0.0f));
            v_store_tail(y + i, V_ADD(v_load_tail(y + i, k, 0.0f), t), k);
        }
    } else {
        for (; i + FX_W <= n; i += FX_W) V_STORE(y + i, V_ADD(V_LOAD(y + i), V_LOAD(x + i)));
        if (i < n)
            v_store_tail(y + i, V_ADD(v_load_tail(y + i, n - i, 0.0f), v_load_tail(x + i, n - i, 0.0f)),
                         n - i);
    }
}

static void softmax_v(int64_t n, float *x) {
    fxv m = V_SET1(-INFINITY);
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) m = V_MAX(m, V_LOAD(x + i));
    if (i < n) m = V_MAX(m, v_load_tail(x + i, n - i, -INFINITY));
    fxv vmax = V_SET1(v_hmax(m));
    /* exponentials stored back, then summed in the documented order */
    for (i = 0; i + FX_W <= n; i += FX_W) V_STORE(x + i, v_exp(V_SUB(V_LOAD(x + i), vmax)));
    if (i < n) v_store_tail(x + i, v_exp(V_SUB(v_load_tail(x + i, n - i, 0.0f), vmax)), n - i);
    float s;
    V_SUM_ROW(n, x, 0.0f, ACC_ADD, s);
    fxv inv = V_SET1((float)(1.0 / (double)s));
    for (i = 0; i + FX_W <= n; i += FX_W) V_STORE(x + i, V_MUL(V_LOAD(x + i), inv));
    if (i < n) v_store_tail(x + i, V_MUL(v_load_tail(x + i, n - i, 0.0f), inv), n - i);
}

static void exp_v(int64_t n, const float *x, float *y) {
    int64_t i = 0;
    for (; i + FX_W <= n; i += FX_W) V_STORE(y + i, v_exp(V_LOAD(x + i)));
    if (i < n) v_store_tail(y + i, v_exp(v_load_tail(x + i, n - i, 0.0f)), n - i);
}

/* (x − mean)·a + beta: sub, mul, add (no FMA) as in the scalar reference */
static void gn_apply_v(int64_t pixels, int channels, const float *x, const float *mean,
                       const float *a, const float *beta, int silu, float *y) {
    for (int64_t p = 0; p < pixels; p++) {
        const float *xr = x + p * channels;
        float *yr = y + p * channels;
        int c = 0;
        for (; c + FX_W <= channels; c += FX_W) {
            fxv v = V_ADD(V_MUL(V_SUB(V_LOAD(xr + c), V_LOAD(mean + c)), V_LOAD(a + c)), V_LOAD(beta + c));
            V_STORE(yr + c, silu ? v_silu(v) : v);
        }
        if (c < channels) {
            int k = channels - c;
            fxv v = V_ADD(V_MUL(V_SUB(v_load_tail(xr + c, k, 0.0f), v_load_tail(mean + c, k, 0.0f)),
                                v_load_tail(a + c, k, 0.0f)),
                          v_load_tail(beta + c, k, 0.0f));
            v_store_tail(yr + c, silu ? v_silu(v) : v, k);
        }
    }
}
