/*
 * rope_simd.h — the RoPE rotation of one head written once over the vector
 * vocabulary of vec_<isa>.h, included by rope_<isa>.c.
 *
 * Both layouts compute, per pair, x0' = x0·c − x1·s and x1' = x1·c + x0·s
 * as two rounded products and one rounded add/sub — exactly the scalar
 * reference's operations (no FMA), so every ISA is bit-identical to it.
 * Interleaved: one vector holds FX_W/2 pairs; the partner of each lane
 * comes from V_SWAP_PAIRS, and the even lanes' product is negated (exact)
 * so that one add gives both outputs. Half-split: the two halves are two
 * aligned streams.
 */

static inline void rope_pair_scalar(float *a, float *b, float c, float s) {
    float x0 = *a, x1 = *b;
    float x0c = x0 * c, x1s = x1 * s, x1c = x1 * c, x0s = x0 * s;
    *a = x0c - x1s;
    *b = x1c + x0s;
}

static void rope_v(float *x, int pairs, fx_rope_layout layout, const float *cos, const float *sin) {
    int p = 0;
    if (layout == FX_ROPE_INTERLEAVED) {
        for (; p + FX_W / 2 <= pairs; p += FX_W / 2) {
            fxv v = V_LOAD(x + 2 * p);
            fxv a = V_MUL(v, v_dup_pairs(cos + p));
            fxv b = V_MUL(V_SWAP_PAIRS(v), v_dup_pairs(sin + p));
            V_STORE(x + 2 * p, V_ADD(a, v_neg_even(b)));
        }
        for (; p < pairs; p++) rope_pair_scalar(x + 2 * p, x + 2 * p + 1, cos[p], sin[p]);
    } else {
        float *h = x + pairs;
        for (; p + FX_W <= pairs; p += FX_W) {
            fxv x0 = V_LOAD(x + p), x1 = V_LOAD(h + p), c = V_LOAD(cos + p), s = V_LOAD(sin + p);
            V_STORE(x + p, V_SUB(V_MUL(x0, c), V_MUL(x1, s)));
            V_STORE(h + p, V_ADD(V_MUL(x1, c), V_MUL(x0, s)));
        }
        for (; p < pairs; p++) rope_pair_scalar(x + p, h + p, cos[p], sin[p]);
    }
}
