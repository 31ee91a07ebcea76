/*
 * to_int8.c — weights into the int8 form of the int8 GEMM (kernels.h
 * fx_int8w): one f32 scale per output row, codes rounded to nearest even.
 *
 * A row is dequantized exactly (the table's dequantizer, bit-identical to
 * the reference; bf16/f16 widened; fp8 and side-scaled weights times their
 * scales), then s = max|x|/127 and code = x·(127/max|x|): the same rule as
 * the activations. I8 weights (int8 checkpoints, one scale per output
 * channel or tensor) are already this form: their codes and scale are taken
 * as they are, not requantized. Q8_0 rows requantized per row lose a little
 * against their per-32 scales (half a step of the row's scale, against
 * half a step of the block's); README "--precision int8" gives the
 * measured error.
 */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <sys/mman.h>

void fx_weight_row_to_int8(const fx_kctx *kc, const fx_weight *w, int64_t r, float *tmp, int8_t *q, float *scale,
                           int32_t *sum) {
    const fx_dtype t = w->dtype;
    const uint8_t *src = (const uint8_t *)w->data + r * fx_dtype_row_bytes(t, w->ld);
    const fx_quant_kernels *qk = kc && kc->k ? kc->k->quant : NULL;
    if (qk && qk->to_int8[t] && !fx_weight_has_scales(w)) { /* one pass, no f32 row */
        qk->to_int8[t](src, w->k, q, scale, sum);
        return;
    }
    fx_dequantize_row_kc(kc, t, src, w->k, tmp);
    fx_weight_values(w, r, 0, w->k, tmp);
    fx_int8_codes(tmp, w->k, q, scale, sum);
}

int fx_int8w_wanted(const fx_kctx *kc, fx_dtype t) {
    if (!kc || !kc->int8) return 0;
    if (t == FX_DTYPE_Q8_0 || t == FX_DTYPE_I8) return 1;
    return kc->int8 == FX_INT8_ALL && (t == FX_DTYPE_F32 || t == FX_DTYPE_F16 || t == FX_DTYPE_BF16 ||
                                       fx_dtype_is_fp8(t));
}

/* Row j of an I8 weight as it is: its codes (any of -128..127: every int8
 * kernel's products are exact for them), its scale (per output channel or
 * per tensor, fx_weight_values of a code 1), their sum. */
static void i8_row(const fx_weight *w, int64_t j, int8_t *q, float *scale, int32_t *sum) {
    const int8_t *src = (const int8_t *)w->data + j * w->ld;
    int32_t s = 0;
    for (int64_t c = 0; c < w->k; c++) s += q[c] = src[c];
    float one = 1.0f;
    fx_weight_values(w, j, 0, 1, &one);
    *scale = one, *sum = s;
}

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

fx_int8w *fx_int8w_new(const fx_kctx *kc, const fx_weight *w) {
    const int i8 = w->dtype == FX_DTYPE_I8;
    if (!fx_dtype_is_weight(w->dtype) || w->n <= 0 || w->k <= 0) return NULL;
    /* I8 takes the form when its scale is one per output row (or tensor) */
    if (i8 && w->scales && (w->scales->rows != 1 || w->scales->cols < w->k)) return NULL;
    fx_int8w *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->n = w->n, f->k = w->k, f->ldq = round_up(w->k, 64), f->rows = round_up(w->n, 32);
    const size_t qb = (size_t)(f->rows * f->ldq), sb = (size_t)f->rows * 4;
    f->bytes = qb + 2 * sb;
    /* an anonymous mapping: page-aligned, eligible for huge pages (the
     * kernels stream these rows) */
    void *mem = mmap(NULL, f->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        free(f);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(mem, f->bytes, MADV_HUGEPAGE);
#endif
    f->q = mem;
    f->scale = (float *)(void *)((char *)mem + qb);
    f->sum = (int32_t *)(void *)((char *)mem + qb + sb);
    const int64_t n = w->n, k = w->k, ldq = f->ldq;
    int failed = 0;
    const int threads = kc && kc->threads > 0 ? kc->threads : 1;
    (void)threads;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        float *tmp = malloc((size_t)k * sizeof(float));
        if (!tmp) failed = 1;
#pragma omp for schedule(static)
        for (int64_t j = 0; j < n; j++) /* rows past n, and bytes past k: zero pages */
            if (i8) i8_row(w, j, f->q + j * ldq, f->scale + j, f->sum + j);
            else if (tmp) fx_weight_row_to_int8(kc, w, j, tmp, f->q + j * ldq, f->scale + j, f->sum + j);
        free(tmp);
    }
    if (failed) {
        fx_int8w_free(f);
        return NULL;
    }
    return f;
}

void fx_int8w_free(fx_int8w *f) {
    if (!f) return;
    munmap(f->q, f->bytes);
    free(f);
}
