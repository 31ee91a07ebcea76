/*
 * kctx.c — a kernel context: the table, the thread count and the scratch.
 */
#include "table.h"

void fx_kctx_init(fx_kctx *kc, const fx_kernels *k, int threads, fx_scratch *s) {
    kc->k = k;
#ifdef _OPENMP
    kc->threads = threads > 0 ? threads : omp_get_max_threads();
#else
    kc->threads = threads > 0 ? threads : 1;
#endif
    kc->scratch = s;
    kc->int8 = 0;
}
