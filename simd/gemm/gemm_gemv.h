/*
 * gemm_gemv.h — the GEMV driver of the x86 tables (m <= FX_GEMV_MAX_M rows
 * of X, W streamed once, no packing), written once: a thread's outputs
 * [n0, n1) in tiles of 4 rows of W, then single rows; the rows of X all at
 * once for m <= 3, else in blocks of 4. The microkernel is the including
 * file's, defined before it is included:
 *   gemv_tile(M, R, dt, j, k, x, ldx, w, y, ldy, epi)
 *     y[i][j + r] (op)= X row i · W row j + r for i < M, r < R, M and R
 *     compile-time constants once inlined; X rows at x + i·ldx
 * FX_GEMV_X is X's element type (default float; uint16_t for X rounded to
 * bf16 rows, the vdpbf16ps GEMV).
 */
#ifndef FX_GEMM_GEMV_H
#define FX_GEMM_GEMV_H

#ifndef FX_GEMV_X
#define FX_GEMV_X float
#endif

static inline __attribute__((always_inline)) void gemv_cols(const int M, fx_dtype dt, int64_t n0, int64_t n1,
                                                            int64_t k, const FX_GEMV_X *x, int64_t ldx,
                                                            const fx_weight *w, float *y, int64_t ldy,
                                                            const fx_epilogue *epi) {
    int64_t j = n0;
    for (; j + 4 <= n1; j += 4) gemv_tile(M, 4, dt, j, k, x, ldx, w, y, ldy, epi);
    for (; j < n1; j++) gemv_tile(M, 1, dt, j, k, x, ldx, w, y, ldy, epi);
}

static inline __attribute__((always_inline)) void gemv_rows(fx_dtype dt, int64_t m, int64_t n0, int64_t n1,
                                                            int64_t k, const FX_GEMV_X *x, int64_t ldx,
                                                            const fx_weight *w, float *y, int64_t ldy,
                                                            const fx_epilogue *epi) {
    switch (m) {
    case 1: gemv_cols(1, dt, n0, n1, k, x, ldx, w, y, ldy, epi); break;
    case 2: gemv_cols(2, dt, n0, n1, k, x, ldx, w, y, ldy, epi); break;
    case 3: gemv_cols(3, dt, n0, n1, k, x, ldx, w, y, ldy, epi); break;
    default:
        for (int64_t i = 0; i < m; i += 4)
            gemv_cols(4, dt, n0, n1, k, x + i * ldx, ldx, w, y + i * ldy, ldy, epi);
    }
}

/* A table's fx_gemv_fn for weights of dtype dt on f32 X (xb unused). */
#define FX_GEMV_ENTRY(name, dt)                                                                        \
    void name(int64_t m, int64_t n0, int64_t n1, int64_t k, const float *x, int64_t ldx, const uint16_t *xb, \
              const fx_weight *w, float *y, int64_t ldy, const fx_epilogue *epi) {                   \
        (void)xb;                                                                                      \
        gemv_rows(dt, m, n0, n1, k, x, ldx, w, y, ldy, epi);                                          \
    }

#endif
