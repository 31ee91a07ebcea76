/*
 * test_kernel_gemm.c — fx_linear on every ISA this machine runs, against a
 * double-precision reference.
 *
 * Tolerances (u = 2⁻²⁴, per output element):
 *   |y − y_ref| <= (k + 4)·u·(Σ_k |x_k·w_k| + |bias|)·|gate| + 4·u·|y_ref|
 * i.e. the classic worst-case bound of an f32 sum of k products, plus the
 * roundings of the epilogue. On tables that use vdpbf16ps (bf16 weights on
 * avx512bf16 without FLUX_PRECISION=f32) the reference rounds X to bf16
 * first (the kernel does so by contract); products of two bf16 values are
 * exact in f32, so the same bound holds against that reference.
 * Thread-count invariance is bitwise (1, 2 and 3 threads).
 */
#include "kernel_isas.h"

#include <sys/mman.h>
#include <unistd.h>

#include "simd/gemm/gemm.h"

#if defined(__aarch64__)
#define BIG(x, small) (small) /* qemu is ~1000x slower: keep shapes tiny */
#else
#define BIG(x, small) (x)
#endif

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct isa_table {
    const fx_kernels *k;
    const char *label;
} isa_table;

/* Every table this machine can run: each ISA, and each again with f32 math
 * where that differs (avx512bf16). */
static int all_tables(isa_table *out) {
    int n = 0;
    kt_check_levels();
    for (int isa = 0; isa < FX_ISA_COUNT; isa++) {
        const fx_kernels *a = fx_kernels_get((fx_isa)isa, 0);
        if (!a) continue;
        out[n++] = (isa_table){a, fx_isa_name((fx_isa)isa)};
        const fx_kernels *b = fx_kernels_get((fx_isa)isa, 1);
        if (b && b != a && fx_kernels_uses_bf16_dot(a) != fx_kernels_uses_bf16_dot(b))
            out[n++] = (isa_table){b, "f32-forced"};
    }
    return n;
}

static double stored_weight(const void *w, fx_dtype dt, int64_t idx) {
    if (dt == FX_DTYPE_F32) return ((const float *)w)[idx];
    uint16_t h = ((const uint16_t *)w)[idx];
    return dt == FX_DTYPE_BF16 ? fx_bf16_bits_to_f32(h) : fx_f16_bits_to_f32(h);
}

/* A random weight value exactly representable in dt, magnitude ~[2⁻⁵, 1]. */
static void put_random_weight(fx_test_rng *r, void *w, fx_dtype dt, int64_t idx) {
    float v = fx_test_rng_uniform(r);
    if (dt == FX_DTYPE_F32) {
        ((float *)w)[idx] = v;
    } else if (dt == FX_DTYPE_BF16) {
        ((uint16_t *)w)[idx] = fx_f32_to_bf16_bits(v);
    } else { /* f16: random sign, exponent 10..14, mantissa */
        uint64_t b = fx_test_rng_u64(r);
        ((uint16_t *)w)[idx] = (uint16_t)(((b & 1) << 15) | ((10 + (b >> 1) % 5) << 10) |
                                          ((b >> 8) & 0x3ff));
    }
}

/* Whether the table rounds X to bf16 for bf16 weights at this m (the
 * vdpbf16ps and AMX paths; the AMX table's GEMV widens W instead). */
static int rounds_x_to_bf16(const fx_kernels *kt, int64_t m) {
    const fx_gemm_kernels *g = kt->gemm ? kt->gemm : &fx_gemm_scalar;
    return m <= FX_GEMV_MAX_M ? g->gemv_bf16_dot : g->path[FX_DTYPE_BF16]->kpair > 1;
}

static size_t dsize(fx_dtype dt) { return dt == FX_DTYPE_F32 ? 4 : 2; }

typedef struct gemm_case {
    int64_t m, n, k;
    fx_dtype dt;
    fx_epilogue_mode mode;
    int bias;
    int64_t xpad, wpad, woff, ypad; /* extra columns: ld = cols + pad; W column slice offset */
} gemm_case;

/* Run one case on table kt with `threads`; returns the number of elements
 * outside tolerance (0 = pass) and stores Y in *y_out (malloc'd) if asked. */
static int64_t run_case(const fx_kernels *kt, int threads, const gemm_case *c, uint64_t seed,
                        float **y_out, double *worst_ratio) {
    fx_test_rng r;
    fx_test_rng_seed(&r, seed);
    const int64_t m = c->m, n = c->n, k = c->k;
    const int64_t ldx = k + c->xpad, ldy = n + c->ypad, ldw = k + c->woff + c->wpad;
    float *x = malloc(sizeof(float) * (size_t)(m * ldx));
    void *wbuf = malloc(dsize(c->dt) * (size_t)(n * ldw));
    float *y = malloc(sizeof(float) * (size_t)(m * ldy));
    float *y0 = malloc(sizeof(float) * (size_t)(m * ldy));
    float *bias = malloc(sizeof(float) * (size_t)n);
    float *gate = malloc(sizeof(float) * (size_t)n);
    fx_test_fill_uniform(&r, x, (size_t)(m * ldx), 1.0f);
    for (int64_t i = 0; i < n * ldw; i++) put_random_weight(&r, wbuf, c->dt, i);
    fx_test_fill_uniform(&r, y0, (size_t)(m * ldy), 2.0f);
    fx_test_fill_uniform(&r, bias, (size_t)n, 1.0f);
    fx_test_fill_uniform(&r, gate, (size_t)n, 1.5f);
    memcpy(y, y0, sizeof(float) * (size_t)(m * ldy));

    fx_weight w = {.data = (const char *)wbuf + dsize(c->dt) * (size_t)c->woff, .dtype = c->dt, .n = n, .k = k, .ld = ldw};
    fx_epilogue epi = {c->mode, c->bias ? bias : NULL, c->mode == FX_EPI_GATED_ACCUMULATE ? gate : NULL};
    fx_scratch *s = fx_scratch_new(threads);
    fx_kctx kc;
    fx_kctx_init(&kc, kt, threads, s);
    fx_linear(&kc, m, x, ldx, &w, y, ldy, &epi);
    fx_scratch_free(s);

    const int round_x = c->dt == FX_DTYPE_BF16 && rounds_x_to_bf16(kt, m);
    const double u = ldexp(1.0, -24);
    double *xd = malloc(sizeof(double) * (size_t)(m * k)), *wd = malloc(sizeof(double) * (size_t)(n * k));
    for (int64_t i = 0; i < m; i++)
        for (int64_t q = 0; q < k; q++) {
            float xv = x[i * ldx + q];
            xd[i * k + q] = round_x ? fx_bf16_bits_to_f32(fx_f32_to_bf16_bits(xv)) : xv;
        }
    for (int64_t j = 0; j < n; j++)
        for (int64_t q = 0; q < k; q++) wd[j * k + q] = stored_weight(wbuf, c->dt, j * ldw + c->woff + q);
    int64_t bad = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double sum = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
                double p = xd[i * k + q] * wd[j * k + q];
                sum += p, mag += fabs(p);
            }
            double b = c->bias ? bias[j] : 0, g = c->mode == FX_EPI_GATED_ACCUMULATE ? gate[j] : 1;
            double t = sum + b, ref;
            if (c->mode == FX_EPI_STORE) ref = t;
            else if (c->mode == FX_EPI_ACCUMULATE) ref = y0[i * ldy + j] + t;
            else ref = y0[i * ldy + j] + g * t;
            double tol = (double)(k + 4) * u * (mag + fabs(b)) * fabs(g) + 4 * u * fabs(ref) + 1e-30;
            double err = fabs(y[i * ldy + j] - ref);
            if (err / tol > *worst_ratio) *worst_ratio = err / tol;
            if (!(err <= tol)) {
                if (bad < 2)
                    printf("    m%lld n%lld k%lld %s mode%d: y[%lld,%lld] = %.9g, ref %.9g (tol %.3g)\n",
                           (long long)m, (long long)n, (long long)k, fx_dtype_name(c->dt),
                           (int)c->mode, (long long)i, (long long)j, y[i * ldy + j], ref, tol);
                bad++;
            }
        }
        for (int64_t j = n; j < ldy; j++) /* padding columns are never written */
            if (memcmp(&y[i * ldy + j], &y0[i * ldy + j], sizeof(float))) bad++;
    }
    free(x), free(wbuf), free(y0), free(bias), free(gate), free(xd), free(wd);
    if (y_out) *y_out = y;
    else free(y);
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

TEST(kernel_gemm_f16_conversion) {
    /* fx_f16_bits_to_f32 against the definition, all 65536 patterns */
    for (uint32_t h = 0; h < 65536; h++) {
        int sign = h >> 15, e = (h >> 10) & 31, man = h & 1023;
        double v;
        if (e == 31) v = man ? NAN : INFINITY;
        else if (e == 0) v = ldexp(man, -24);
        else v = ldexp(1024 + man, e - 25);
        if (sign) v = -v;
        float got = fx_f16_bits_to_f32((uint16_t)h);
        if (isnan(v)) CHECK_MSG(isnan(got), "f16 %04x: not NaN", h);
        else CHECK_MSG(got == (float)v, "f16 %04x: %g vs %g", h, got, v);
    }
}

/* A case of the grid (m, n, k) for the seed. */
typedef gemm_case (*case_maker)(int64_t m, int64_t n, int64_t k, uint64_t seed);

/* Every (m, n, k) of the grid (skipping m·n·k > max_mnk) on every table,
 * 2 threads, one line per table. */
static void check_grid(const int64_t *ms, size_t nm, const int64_t *ns, size_t nn, const int64_t *ks, size_t nk,
                       int64_t max_mnk, case_maker make, uint64_t seed0) {
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++) {
        double worst = 0;
        int64_t cases = 0, bad = 0;
        uint64_t seed = seed0;
        for (size_t a = 0; a < nm; a++)
            for (size_t b = 0; b < nn; b++)
                for (size_t q = 0; q < nk; q++, seed++) {
                    if (ms[a] * ns[b] * ks[q] > max_mnk) continue;
                    gemm_case c = make(ms[a], ns[b], ks[q], seed);
                    bad += run_case(tabs[t].k, 2, &c, seed + 1, NULL, &worst) != 0;
                    cases++;
                }
        printf("    %-12s %lld cases, worst error/tolerance %.3f\n", tabs[t].label, (long long)cases, worst);
        CHECK_MSG(bad == 0, "%s: %lld of %lld cases out of tolerance", tabs[t].label, (long long)bad,
                  (long long)cases);
    }
}

/* Every dtype, epilogue, with and without bias, in turn. */
static gemm_case any_case(int64_t m, int64_t n, int64_t k, uint64_t seed) {
    return (gemm_case){m, n, k, (fx_dtype)(seed % 3), (fx_epilogue_mode)(seed / 3 % 3), (int)(seed / 9 % 2), 0, 0, 0, 0};
}

/* Awkward shapes (M, N, K in {1, 7, 17, 33, 255, ...}, K odd), every dtype,
 * every epilogue, with and without bias, on every table. */
TEST(kernel_gemm_shapes_all_isas) {
    static const int64_t ms[] = {1, 2, 4, 5, 7, 17, 33, 255};
    static const int64_t ns[] = {1, 7, 17, 33, 255};
    static const int64_t ks[] = {1, 2, 7, 17, 33, 255, 256, 513};
    check_grid(ms, 8, ns, 5, ks, 8, BIG(4000000, 300000), any_case, 1);
}

/* Every (dtype × epilogue × bias) on shapes that span several K blocks and
 * several column chunks, the staging buffer of the accumulating modes over
 * several row super-blocks and column chunks, plus ld > k row strides and a
 * column slice of a wider weight. */
TEST(kernel_gemm_blocks_epilogues_slices) {
    const gemm_case shapes[] = {
        /* m, n, k */
        {BIG(19, 5), 4500, BIG(37, 5), 0, 0, 0, 3, 5, 11, 2},       /* several NC chunks */
        {BIG(31, 9), BIG(40, 20), BIG(1601, 601), 0, 0, 0, 1, 0, 7, 0},  /* several K blocks, K odd */
        {BIG(1300, 600), BIG(6, 2), BIG(1601, 601), 0, 0, 0, 0, 2, 0, 1}, /* staging, row super-blocks */
        {5, BIG(3700, 300), BIG(1601, 601), 0, 0, 0, 0, 0, 0, 0}, /* staging, column chunks */
        {BIG(3, 3), BIG(300, 33), BIG(777, 77), 0, 0, 0, 5, 1, 9, 3},    /* GEMV with slices */
    };
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++) {
        double worst = 0;
        int64_t bad = 0, cases = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int dt = 0; dt < 3; dt++)
                for (int mode = 0; mode < 3; mode++)
                    for (int bias = 0; bias < 2; bias++) {
                        if ((s == 2 || s == 3) && (dt == FX_DTYPE_F16 || bias || mode == FX_EPI_STORE))
                            continue; /* big: keep it short */
                        gemm_case c = shapes[s];
                        c.dt = (fx_dtype)dt, c.mode = (fx_epilogue_mode)mode, c.bias = bias;
                        int64_t e = run_case(tabs[t].k, 2, &c, 100 + s * 31 + dt * 7 + mode * 3 + bias,
                                             NULL, &worst);
                        if (e) printf("    case %zu dtype %d mode %d bias %d: %lld bad\n", s, dt, mode, bias,
                                      (long long)e);
                        bad += e != 0, cases++;
                    }
        printf("    %-12s %lld cases, worst error/tolerance %.3f\n", tabs[t].label, (long long)cases, worst);
        CHECK_MSG(bad == 0, "%s: %lld of %lld cases out of tolerance", tabs[t].label, (long long)bad,
                  (long long)cases);
    }
}

/* Bitwise identical results for 1, 2 and 3 threads: threads owning column
 * panels (wide n) or row tiles (narrow n), staging, GEMV. */
TEST(kernel_gemm_thread_invariance) {
    const gemm_case shapes[] = {
        {BIG(300, 40), BIG(200, 60), BIG(700, 601), FX_DTYPE_BF16, FX_EPI_GATED_ACCUMULATE, 1, 1, 0, 0, 2},
        {BIG(600, 200), BIG(40, 20), BIG(700, 601), FX_DTYPE_F32, FX_EPI_ACCUMULATE, 1, 0, 0, 0, 0},
        {BIG(9, 9), BIG(1000, 400), BIG(400, 300), FX_DTYPE_BF16, FX_EPI_ACCUMULATE, 0, 0, 3, 1, 0},
        {BIG(9, 9), BIG(1000, 400), BIG(400, 300), FX_DTYPE_F16, FX_EPI_STORE, 1, 0, 0, 0, 0},
        {BIG(3, 3), BIG(2000, 700), BIG(1000, 600), FX_DTYPE_BF16, FX_EPI_STORE, 1, 0, 0, 0, 0},
    };
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            /* big enough that fx_linear really uses several threads */
            CHECK(2.0 * (double)(shapes[s].m * shapes[s].n * shapes[s].k) >= FX_GEMM_SERIAL_FLOPS);
            float *ref = NULL;
            double worst = 0;
            int64_t m = shapes[s].m, ldy = shapes[s].n + shapes[s].ypad;
            CHECK(run_case(tabs[t].k, 1, &shapes[s], 77 + s, &ref, &worst) == 0);
            for (int threads = 2; threads <= 3; threads++) {
                float *y = NULL;
                CHECK(run_case(tabs[t].k, threads, &shapes[s], 77 + s, &y, &worst) == 0);
                CHECK_MSG(!memcmp(y, ref, sizeof(float) * (size_t)(m * ldy)),
                          "%s shape %zu: %d threads differ from 1 thread", tabs[t].label, s, threads);
                free(y);
            }
            free(ref);
        }
}

/* Degenerate sizes: m = 0 and n = 0 write nothing; k = 0 gives the
 * epilogue of zeros; a NULL epilogue stores. */
TEST(kernel_gemm_degenerate) {
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++) {
        fx_scratch *s = fx_scratch_new(2);
        fx_kctx kc;
        fx_kctx_init(&kc, tabs[t].k, 2, s);
        float x[4] = {1, 2, 3, 4}, wv[8] = {1, 1, 1, 1, 2, 2, 2, 2}, y[8] = {5, 5, 5, 5, 5, 5, 5, 5};
        float bias[2] = {0.5f, -1}, gate[2] = {2, 3};
        fx_weight w = {.data = wv, .dtype = FX_DTYPE_F32, .n = 2, .k = 4, .ld = 4};
        fx_linear(&kc, 0, x, 4, &w, y, 2, NULL);
        for (int i = 0; i < 8; i++) CHECK(y[i] == 5);
        fx_weight w0 = {.data = wv, .dtype = FX_DTYPE_F32, .n = 2, .k = 0, .ld = 4};
        fx_epilogue e = {FX_EPI_GATED_ACCUMULATE, bias, gate};
        fx_linear(&kc, 1, x, 4, &w0, y, 2, &e);
        CHECK(y[0] == 6 && y[1] == 2);
        fx_linear(&kc, 1, x, 4, &w, y, 2, NULL);
        CHECK(y[0] == 10 && y[1] == 20);
        fx_scratch_free(s);
    }
}

/* Every table's GEMM matches its dispatch entry: vdpbf16ps paths exactly on
 * the tables that report bf16 dot products, blocks the driver can use. */
TEST(kernel_gemm_tables) {
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++) {
        const fx_gemm_kernels *g = tabs[t].k->gemm ? tabs[t].k->gemm : &fx_gemm_scalar;
        const int dot = fx_kernels_uses_bf16_dot(tabs[t].k);
        CHECK_MSG((g->path[FX_DTYPE_BF16]->kpair > 1) == dot, "%s: bf16 path kpair %d, table bf16_dot %d",
                  tabs[t].label, g->path[FX_DTYPE_BF16]->kpair, dot);
        CHECK_MSG(!g->gemv_bf16_dot || dot, "%s: gemv_bf16_dot %d", tabs[t].label, g->gemv_bf16_dot);
        for (int dt = 0; dt < 3; dt++) {
            const fx_gemm_path *p = g->path[dt];
            CHECK_MSG(p && p->pack_x && p->pack_w[dt] && p->kernel && g->gemv[dt], "%s: dtype %d incomplete",
                      tabs[t].label, dt);
            if (!p) continue;
            CHECK_MSG(p->kc % 32 == 0 && p->mc % p->mr == 0 && p->nc % p->nr == 0,
                      "%s %s: blocks kc %d mc %d nc %d vs tile %dx%d", tabs[t].label, p->name, p->kc, p->mc,
                      p->nc, p->mr, p->nr);
            CHECK(dt == FX_DTYPE_BF16 || p->kpair == 1); /* f32/f16 weights: always the f32 path */
        }
    }
}

/* bf16 weights, every epilogue, strided X / Y and a column slice of W. */
static gemm_case edge_case(int64_t m, int64_t n, int64_t k, uint64_t seed) {
    return (gemm_case){m, n, k, FX_DTYPE_BF16, (fx_epilogue_mode)(seed % 3), (int)(seed / 3 % 2),
                       (int64_t)(seed % 5), 1, (int64_t)(seed % 3), (int64_t)(seed % 4)};
}

/* Shapes around the 16- and 32-wide tile edges (the AMX 2×2 tiles and the
 * 1×2 / 2×1 / 1×1 edge variants) and just past the GEMV, on every table. */
TEST(kernel_gemm_tile_edges) {
    static const int64_t ms[] = {5, 16, 17, 31, 33, BIG(64, 20)};
    static const int64_t ns[] = {1, 15, 17, 32, 33};
    static const int64_t ks[] = {1, 31, 32, 33, 95};
    check_grid(ms, 6, ns, 5, ks, 5, INT64_MAX, edge_case, 500);
}

/* K long enough for several K blocks of every path (AMX: KC 3072), with
 * the partial sums in Y (store) and in the staging buffer (accumulating
 * modes). */
TEST(kernel_gemm_long_k) {
    const int64_t k = BIG(6500, 1700);
    isa_table tabs[2 * FX_ISA_COUNT];
    int nt = all_tables(tabs);
    for (int t = 0; t < nt; t++) {
        double worst = 0;
        int64_t bad = 0;
        for (int mode = 0; mode < 3; mode++) {
            gemm_case c = {BIG(40, 18), BIG(48, 20), k, FX_DTYPE_BF16, (fx_epilogue_mode)mode, 1, 3, 0, 1, 5};
            bad += run_case(tabs[t].k, 2, &c, 900 + mode, NULL, &worst) != 0;
        }
        printf("    %-12s k=%lld worst error/tolerance %.3f\n", tabs[t].label, (long long)k, worst);
        CHECK_MSG(bad == 0, "%s: %lld of 3 long-K cases out of tolerance", tabs[t].label, (long long)bad);
    }
}


/* ------------------------------------------------------------------------ */
/* The amx table's tile driver (gemm_amx.c: weights read in place). These  */
/* run wherever the amx table runs: the x86 emulation suite on any host,   */
/* natively on an AMX machine.                                              */
/* ------------------------------------------------------------------------ */

/* The amx table, with the tile driver's blocks replaced (0: keep). */
typedef struct amx_tuned {
    fx_gemm_tiles tiles;
    fx_gemm_kernels gemm;
    fx_kernels k;
} amx_tuned;

static const fx_kernels *amx_blocks(amx_tuned *t, int kc, int mc, int nc) {
    const fx_kernels *a = fx_kernels_get(FX_ISA_AMX, 0);
    if (!a || !a->gemm || !a->gemm->tiles) return NULL;
    t->tiles = *a->gemm->tiles;
    if (kc) t->tiles.kc = kc;
    if (mc) t->tiles.mc = mc;
    if (nc) t->tiles.nc = nc;
    t->gemm = *a->gemm;
    t->gemm.tiles = &t->tiles;
    t->k = *a;
    t->k.gemm = &t->gemm;
    return &t->k;
}

/* 1 if the amx table runs here, else prints why not. */
static int amx_here(void) {
    kt_check_levels();
    if (fx_kernels_get(FX_ISA_AMX, 0)) return 1;
    char why[512];
    fx_isa_check(FX_ISA_AMX, why, sizeof why);
    printf("    the amx tile driver does not run natively here (%s); the x86 emulation suite runs it\n", why);
    return 0;
}

/* Blockings of the tile driver: the table's, tiny ones that cut every
 * dimension into many blocks (KC = 32: one k step per K block), odd ones,
 * and one larger than any shape. {kc, mc, nc} */
static const int amx_blockings[][3] = {{0, 0, 0}, {32, 32, 1}, {64, 64, 2}, {96, 96, 3}, {4096, 4096, 64}};
enum { AMX_BLOCKINGS = sizeof amx_blockings / sizeof *amx_blockings };

/* bf16 weights, epilogue and bias by seed, strided X / W / Y and a column
 * slice of W. */
static gemm_case amx_case(int64_t m, int64_t n, int64_t k, uint64_t seed) {
    return (gemm_case){m, n, k, FX_DTYPE_BF16, (fx_epilogue_mode)(seed % 3), (int)(seed / 3 % 2),
                       (int64_t)(seed % 3), (int64_t)(seed % 2), (int64_t)(seed % 5 == 0), (int64_t)(seed % 4)};
}

/* Against the double reference (tolerances of run_case): rows of X
 * m = 5 .. 100 (one to four 32-row blocks, <= 16 and > 16 rows in the last),
 * n tails (1 .. 48: panels of fewer than 32 rows, <= 16 and > 16), K tails
 * (16, 30, 48, 96: k % 32 != 0 and exact), every epilogue with and without
 * bias, on the table's blocks and on blocks of one k step. */
TEST(kernel_gemm_amx_shapes) {
    if (!amx_here()) return;
    static const int64_t ms[] = {5, 16, 17, 33, 100};
    static const int64_t ns[] = {1, 16, 17, 31, 33, 48};
    static const int64_t ks[] = {16, 30, 32, 48, 96};
    for (int b = 0; b < 2; b++) {
        amx_tuned tt;
        const fx_kernels *kt = amx_blocks(&tt, amx_blockings[b][0], amx_blockings[b][1], amx_blockings[b][2]);
        REQUIRE(kt != NULL);
        double worst = 0;
        int64_t cases = 0, bad = 0;
        uint64_t seed = 1000;
        for (size_t a = 0; a < 5; a++)
            for (size_t c = 0; c < 6; c++)
                for (size_t q = 0; q < 5; q++)
                    for (int v = 0; v < 6; v++, seed++) { /* each (mode, bias) with varying strides */
                        gemm_case gc = amx_case(ms[a], ns[c], ks[q], seed);
                        gc.mode = (fx_epilogue_mode)(v % 3), gc.bias = v / 3;
                        bad += run_case(kt, 2, &gc, seed, NULL, &worst) != 0;
                        cases++;
                    }
        printf("    blocks kc %d mc %d nc %d: %lld cases, worst error/tolerance %.3f\n", tt.tiles.kc, tt.tiles.mc,
               tt.tiles.nc, (long long)cases, worst);
        CHECK_MSG(bad == 0, "%lld of %lld cases out of tolerance", (long long)bad, (long long)cases);
    }
}

/* k = 3072 + 32 on several K blocks (13 of the table's 256, 97 of 32, 2
 * of 3072, one of 4096; the last 32 k are a K block of their own or not)
 * and with a K tail (3072 + 40): within tolerance, and every blocking
 * gives the same bits. */
TEST(kernel_gemm_amx_long_k) {
    if (!amx_here()) return;
    static const int kcs[] = {0, 32, 3072, 4096};
    static const int64_t kks[] = {3072 + 32, 3072 + 40};
    for (size_t kk = 0; kk < 2; kk++)
        for (int mode = 0; mode < 3; mode++) {
            gemm_case c = {33, 48, kks[kk], FX_DTYPE_BF16, (fx_epilogue_mode)mode, 1, 3, 1, 2, 5};
            float *ref = NULL;
            for (size_t b = 0; b < sizeof kcs / sizeof *kcs; b++) {
                amx_tuned tt;
                const fx_kernels *kt = amx_blocks(&tt, kcs[b], 0, 0);
                REQUIRE(kt != NULL);
                double worst = 0;
                float *y = NULL;
                CHECK_MSG(run_case(kt, 2, &c, 40 + mode, &y, &worst) == 0, "k %lld mode %d kc %d: out of tolerance",
                          (long long)c.k, mode, tt.tiles.kc);
                if (!ref) ref = y;
                else {
                    CHECK_MSG(!memcmp(ref, y, sizeof(float) * (size_t)(c.m * (c.n + c.ypad))),
                              "k %lld mode %d: kc %d differs from the table's K blocks", (long long)c.k, mode,
                              tt.tiles.kc);
                    free(y);
                }
            }
            free(ref);
        }
}

/* A block-typed weight [n, k] from random values; *bf16_out: its values
 * dequantized and rounded to bf16 (RNE), [n][k]. */
static void *amx_block_weight(fx_dtype t, int64_t n, int64_t k, uint64_t seed, uint16_t **bf16_out) {
    const int64_t rb = fx_dtype_row_bytes(t, k);
    uint8_t *q = malloc((size_t)(n * rb));
    uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)(n * k));
    float *row = malloc(sizeof(float) * (size_t)k);
    fx_test_rng r;
    fx_test_rng_seed(&r, seed);
    for (int64_t j = 0; j < n; j++) {
        fx_test_fill_uniform(&r, row, (size_t)k, 0.5f);
        fx_quantize_row(t, row, k, q + j * rb);
        fx_dequantize_row(t, q + j * rb, k, row);
        for (int64_t i = 0; i < k; i++) wb[j * k + i] = fx_f32_to_bf16_bits(row[i]);
    }
    free(row);
    *bf16_out = wb;
    return q;
}

/* y (op)= x·wᵀ with table kt on `threads` into y (m × ldy, which holds
 * the values to accumulate into). */
static void linear_into(const fx_kernels *kt, int threads, int64_t m, const float *x, int64_t ldx, const fx_weight *w,
                        float *y, int64_t ldy, const fx_epilogue *e) {
    fx_scratch *s = fx_scratch_new(threads);
    fx_kctx kc;
    fx_kctx_init(&kc, kt, threads, s);
    fx_linear(&kc, m, x, ldx, w, y, ldy, e);
    fx_scratch_free(s);
}

/* GGUF block types (q8_0, q4_k, and q4_0, q6_k) through the tile driver:
 * bit for bit the driver on the same values as a bf16 weight (each panel
 * expanded once, read as A from there), for n tails, m tails, every
 * epilogue, thread counts and blockings. */
TEST(kernel_gemm_amx_block_types) {
    if (!amx_here()) return;
    static const struct {
        fx_dtype t;
        int64_t m, n, k;
    } cases[] = {
        {FX_DTYPE_Q8_0, 5, 17, 96},    {FX_DTYPE_Q8_0, 33, 48, 3104}, {FX_DTYPE_Q8_0, 100, 33, 64},
        {FX_DTYPE_Q4_K, 17, 33, 256},  {FX_DTYPE_Q4_K, 40, 100, 512}, {FX_DTYPE_Q4_0, 16, 31, 64},
        {FX_DTYPE_Q6_K, 33, 16, 256},
    };
    int64_t checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t m = cases[c].m, n = cases[c].n, k = cases[c].k;
        uint16_t *wb;
        void *wq = amx_block_weight(cases[c].t, n, k, 70 + c, &wb);
        float *x = kt_alloc((size_t)(m * k)), *y0 = kt_alloc((size_t)(m * n)), *bias = kt_alloc((size_t)n),
              *gate = kt_alloc((size_t)n), *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
        fx_test_rng r;
        fx_test_rng_seed(&r, 90 + c);
        fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
        fx_test_fill_uniform(&r, y0, (size_t)(m * n), 1.0f);
        fx_test_fill_uniform(&r, bias, (size_t)n, 1.0f);
        fx_test_fill_uniform(&r, gate, (size_t)n, 1.0f);
        const fx_weight w = {.data = wq, .dtype = cases[c].t, .n = n, .k = k, .ld = k}, w16 = {.data = wb, .dtype = FX_DTYPE_BF16, .n = n, .k = k, .ld = k};
        for (int mode = 0; mode < 3; mode++) {
            const fx_epilogue e = {(fx_epilogue_mode)mode, mode != 1 ? bias : NULL, mode == 2 ? gate : NULL};
            const int b = (int)((c + (size_t)mode) % AMX_BLOCKINGS), threads = 1 + (int)((c + (size_t)mode) % 3);
            amx_tuned tt;
            const fx_kernels *kt = amx_blocks(&tt, amx_blockings[b][0], amx_blockings[b][1], amx_blockings[b][2]);
            REQUIRE(kt != NULL);
            memcpy(ya, y0, sizeof(float) * (size_t)(m * n));
            memcpy(yb, y0, sizeof(float) * (size_t)(m * n));
            linear_into(kt, threads, m, x, k, &w, ya, n, &e);
            linear_into(kt, threads, m, x, k, &w16, yb, n, &e);
            long d = kt_bitdiff(ya, yb, (size_t)(m * n), sizeof(float));
            CHECK_MSG(d < 0, "%s m%lld n%lld k%lld mode %d (kc %d mc %d nc %d, %d threads): y[%ld] %.9g vs bf16 %.9g",
                      fx_dtype_name(cases[c].t), (long long)m, (long long)n, (long long)k, mode, tt.tiles.kc,
                      tt.tiles.mc, tt.tiles.nc, threads, d, d >= 0 ? ya[d] : 0.0, d >= 0 ? yb[d] : 0.0);
            checked++;
        }
        free(wq), free(wb), free(x), free(y0), free(bias), free(gate), free(ya), free(yb);
    }
    printf("    %lld block-typed products equal their bf16 values' bit for bit\n", (long long)checked);
}

/* Bitwise the same Y for 1, 2 and 3 threads and every blocking: threads
 * owning weight panels (wide n) or rows of X (narrow n), K blocks staged
 * in the accumulating modes, a K tail, an n tail, a block type. */
TEST(kernel_gemm_amx_invariance) {
    if (!amx_here()) return;
    const gemm_case shapes[] = {
        {100, 200, 1000, FX_DTYPE_BF16, FX_EPI_GATED_ACCUMULATE, 1, 2, 1, 3, 1},
        {150, 40, 330, FX_DTYPE_BF16, FX_EPI_ACCUMULATE, 0, 0, 0, 0, 3},
        {37, 230, 512, FX_DTYPE_BF16, FX_EPI_STORE, 1, 0, 0, 0, 0},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        CHECK(2.0 * (double)(shapes[s].m * shapes[s].n * shapes[s].k) >= FX_GEMM_SERIAL_FLOPS);
        float *ref = NULL;
        const size_t count = (size_t)(shapes[s].m * (shapes[s].n + shapes[s].ypad));
        for (int b = 0; b < AMX_BLOCKINGS; b++)
            for (int threads = 1; threads <= 3; threads++) {
                amx_tuned tt;
                const fx_kernels *kt = amx_blocks(&tt, amx_blockings[b][0], amx_blockings[b][1], amx_blockings[b][2]);
                REQUIRE(kt != NULL);
                double worst = 0;
                float *y = NULL;
                CHECK(run_case(kt, threads, &shapes[s], 60 + s, &y, &worst) == 0);
                if (!ref) {
                    ref = y;
                    continue;
                }
                CHECK_MSG(!memcmp(y, ref, sizeof(float) * count),
                          "shape %zu: kc %d mc %d nc %d, %d threads differ from the table's blocks on 1 thread", s,
                          tt.tiles.kc, tt.tiles.mc, tt.tiles.nc, threads);
                free(y);
            }
        free(ref);
    }
    /* a block type (expanded chunks) */
    const int64_t m = 40, n = 100, k = 320;
    uint16_t *wb;
    void *wq = amx_block_weight(FX_DTYPE_Q8_0, n, k, 5, &wb);
    float *x = kt_alloc((size_t)(m * k)), *ref = kt_alloc((size_t)(m * n)), *y = kt_alloc((size_t)(m * n));
    fx_test_rng r;
    fx_test_rng_seed(&r, 6);
    fx_test_fill_uniform(&r, x, (size_t)(m * k), 1.0f);
    const fx_weight w = {.data = wq, .dtype = FX_DTYPE_Q8_0, .n = n, .k = k, .ld = k};
    for (int b = 0; b < AMX_BLOCKINGS; b++)
        for (int threads = 1; threads <= 3; threads++) {
            amx_tuned tt;
            const fx_kernels *kt = amx_blocks(&tt, amx_blockings[b][0], amx_blockings[b][1], amx_blockings[b][2]);
            REQUIRE(kt != NULL);
            linear_into(kt, threads, m, x, k, &w, b || threads > 1 ? y : ref, n, NULL);
            if (b || threads > 1)
                CHECK_MSG(!memcmp(y, ref, sizeof(float) * (size_t)(m * n)), "q8_0: kc %d mc %d nc %d, %d threads differ",
                          tt.tiles.kc, tt.tiles.mc, tt.tiles.nc, threads);
        }
    free(wq), free(wb), free(x), free(ref), free(y);
}

/* Memory whose `bytes` end exactly where an inaccessible page begins
 * (at_end) or begin exactly where one ends: any read past (or before) the
 * bytes faults. Free with guarded_free. */
typedef struct guarded {
    char *map;
    size_t map_bytes;
    void *p;
} guarded;

static int guarded_alloc(guarded *g, size_t bytes, int at_end) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = (bytes + page - 1) / page * page;
    g->map_bytes = body + 2 * page;
    g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED) return -1;
    if (mprotect(g->map, page, PROT_NONE) || mprotect(g->map + page + body, page, PROT_NONE)) return -1;
    g->p = at_end ? g->map + page + body - bytes : g->map + page;
    return 0;
}
static void guarded_free(guarded *g) { munmap(g->map, g->map_bytes); }

/* Nothing reads outside a tensor: weights (and X) whose last row ends
 * exactly at an inaccessible page, or whose first row starts right after
 * one; n tails, K tails in the last panel (full or not), a row stride past
 * k (the last row ends at k, not at ld), and a block type. The results
 * equal those from ordinary memory. */
TEST(kernel_gemm_amx_reads_inside) {
    if (!amx_here()) return;
    static const struct {
        fx_dtype t;
        int64_t m, n, k, ld;
    } cases[] = {
        {FX_DTYPE_BF16, 33, 33, 48, 48}, {FX_DTYPE_BF16, 17, 64, 96, 100}, {FX_DTYPE_BF16, 40, 17, 16, 16},
        {FX_DTYPE_BF16, 5, 40, 3104, 3104}, {FX_DTYPE_BF16, 20, 64, 48, 48},  {FX_DTYPE_BF16, 33, 32, 30, 30},
        {FX_DTYPE_BF16, 9, 32, 40, 45},     {FX_DTYPE_Q8_0, 33, 33, 96, 96},
    };
    const fx_kernels *amx = fx_kernels_get(FX_ISA_AMX, 0);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int at_end = 0; at_end < 2; at_end++) {
            const fx_dtype t = cases[c].t;
            const int64_t m = cases[c].m, n = cases[c].n, k = cases[c].k, ld = cases[c].ld;
            const size_t wbytes = (size_t)(fx_dtype_row_bytes(t, (n - 1) * ld) + fx_dtype_row_bytes(t, k));
            const size_t xbytes = sizeof(float) * (size_t)(m * k);
            guarded gw, gx;
            REQUIRE(!guarded_alloc(&gw, wbytes, at_end) && !guarded_alloc(&gx, xbytes, at_end));
            fx_test_rng r;
            fx_test_rng_seed(&r, 300 + c);
            fx_test_fill_uniform(&r, gx.p, (size_t)(m * k), 1.0f);
            if (t == FX_DTYPE_BF16) {
                for (int64_t i = 0; i < (int64_t)(wbytes / 2); i++) put_random_weight(&r, gw.p, t, i);
            } else {
                uint16_t *wb;
                void *wq = amx_block_weight(t, n, k, 310 + c, &wb); /* ld == k: rows back to back */
                memcpy(gw.p, wq, wbytes);
                free(wq), free(wb);
            }
            void *wcopy = malloc(wbytes);
            float *xcopy = kt_alloc((size_t)(m * k));
            memcpy(wcopy, gw.p, wbytes);
            memcpy(xcopy, gx.p, xbytes);
            float *bias = kt_alloc((size_t)n), *ya = kt_alloc((size_t)(m * n)), *yb = kt_alloc((size_t)(m * n));
            fx_test_fill_uniform(&r, bias, (size_t)n, 1.0f);
            const fx_epilogue e = {FX_EPI_STORE, bias, NULL};
            const fx_weight wg = {.data = gw.p, .dtype = t, .n = n, .k = k, .ld = ld}, wc = {.data = wcopy, .dtype = t, .n = n, .k = k, .ld = ld};
            for (int b = 0; b < 2; b++) { /* the table's blocks; one k step per K block */
                amx_tuned tt;
                const fx_kernels *kt = b ? amx_blocks(&tt, 32, 32, 1) : amx;
                linear_into(kt, 2, m, gx.p, k, &wg, ya, n, &e);
                linear_into(kt, 2, m, xcopy, k, &wc, yb, n, &e);
                CHECK_MSG(!memcmp(ya, yb, sizeof(float) * (size_t)(m * n)),
                          "%s m%lld n%lld k%lld ld%lld: guarded memory gives other results", fx_dtype_name(t),
                          (long long)m, (long long)n, (long long)k, (long long)ld);
            }
            guarded_free(&gw), guarded_free(&gx);
            free(wcopy), free(xcopy), free(bias), free(ya), free(yb);
        }
}
