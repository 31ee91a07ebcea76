/*
 * conv2d.c — 2-D convolution for the VAE as an implicit GEMM on the GEMM
 * microkernels (gemm.h).
 *
 * Channels-last, batch 1: x [h, w, cin] → y [ho, wo, cout], weight as stored
 * [cout, cin, kh, kw] = an fx_weight [cout, cin·kh·kw].
 *
 *   Y[pixel, co] = Σ_k A[pixel, k] · W'[co, k],   k = (ky, kx, ci)
 *
 * W' is the weight reordered to [cout, kh, kw, cin] and packed once per
 * layer into the microkernel's B micro-panels for the whole K
 * (fx_conv2d_pack: ceil(cout/NR) panels of [ceil(K/kpair)][NR][kpair]),
 * shared read-only by all threads. A is never materialised: the output
 * pixels (raster order) are cut into MR-pixel tiles (a tile may wrap to the
 * next output row) and blocks of up to BLOCK_TILES tiles, handed out to the
 * threads dynamically. For each tile a thread gathers its im2col rows — kh·kw
 * contiguous copies of cin floats, or zeros for padding — into a small
 * per-thread buffer [MR][K] (L2), packs it into an A micro-panel, and once
 * the block is packed runs, for every B panel, the microkernel over the
 * block's tiles with the full K in one call. These loops are the GEMM
 * nest's (simd/gemm/gemm_nest.h: dynamic M blocks); this file gives its
 * hooks.
 *
 * Determinism: every output element is one microkernel reduction over the
 * full K in k order, whichever thread computes its block: results are
 * bit-identical for any thread count and schedule. One parallel region per
 * call.
 *
 * Nearest ×2 upsampling and asymmetric zero padding are folded into the
 * gather indexing: the upsampled, padded input is never materialised.
 * The input may be a window of rows (x_row0, x_rows) of the whole tensor:
 * a layer run strip by strip passes only the rows a strip reads.
 */
#include "simd/gemm/gemm.h"
#include "simd/gemm/gemm_nest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tiles per block: a block's A micro-panels (BLOCK_TILES · MR · K packed
 * elements) and one B micro-panel (K · NR) stay within L2 for K ≤ 4608 on
 * the bf16 path; fewer tiles when the panels are larger. */
#define BLOCK_TILES_MAX 4
#define L2_BUDGET ((size_t)800 << 10)

typedef struct conv_pack_header {
    const fx_gemm_path *path;
    fx_dtype dtype;
    int cout, cin, kh, kw;
    int64_t k, ksteps;
    size_t panel_bytes; /* stride of the B micro-panels: ksteps · NR · kpair · elem + slack */
    int panels;
} conv_pack_header;

#define HEADER_BYTES ((sizeof(conv_pack_header) + 63) & ~(size_t)63)

static int64_t ceil_div(int64_t v, int64_t a) { return (v + a - 1) / a; }
static size_t round64(size_t v) { return (v + 63) & ~(size_t)63; }

static int geom_ok(const fx_conv2d_geom *g) {
    return g->h > 0 && g->w > 0 && g->cin > 0 && g->cout > 0 && g->kh > 0 && g->kw > 0 &&
           g->stride > 0 && g->pad_top >= 0 && g->pad_left >= 0 && g->pad_bottom >= 0 &&
           g->pad_right >= 0;
}

void fx_conv2d_out_size(const fx_conv2d_geom *g, int *ho, int *wo) {
    *ho = *wo = 0;
    if (!geom_ok(g)) return;
    int64_t hh = (int64_t)g->h << (g->upsample2x ? 1 : 0);
    int64_t ww = (int64_t)g->w << (g->upsample2x ? 1 : 0);
    int64_t nh = hh + g->pad_top + g->pad_bottom - g->kh;
    int64_t nw = ww + g->pad_left + g->pad_right - g->kw;
    if (nh < 0 || nw < 0) return;
    *ho = (int)(nh / g->stride + 1);
    *wo = (int)(nw / g->stride + 1);
}

void fx_conv2d_input_rows(const fx_conv2d_geom *g, int row0, int row1, int *in0, int *in1) {
    const int up = g->upsample2x ? 1 : 0;
    const int64_t hh = (int64_t)g->h << up;
    int64_t a = (int64_t)row0 * g->stride - g->pad_top;
    int64_t b = (int64_t)(row1 - 1) * g->stride - g->pad_top + g->kh; /* exclusive */
    if (a < 0) a = 0;
    if (b > hh) b = hh;
    if (row1 <= row0 || a >= b) {
        *in0 = *in1 = 0;
        return;
    }
    *in0 = (int)(a >> up);
    *in1 = (int)((b - 1) >> up) + 1;
}

static const fx_gemm_path *conv_path(const fx_kctx *kc, fx_dtype t) {
    const fx_gemm_kernels *gk = kc && kc->k && kc->k->gemm ? kc->k->gemm : &fx_gemm_scalar;
    if ((unsigned)t > FX_DTYPE_BF16) return NULL;
    const fx_gemm_path *p = gk->path[t];
    return p && p->pack_w[t] ? p : NULL;
}

static size_t panel_bytes(const fx_gemm_path *p, int64_t k) {
    return (size_t)ceil_div(k, p->kpair) * (size_t)p->nr * (size_t)p->kpair * (size_t)p->elem;
}

size_t fx_conv2d_packed_bytes(const fx_kctx *kc, const fx_conv2d_geom *g, fx_dtype wdtype) {
    const fx_gemm_path *p = conv_path(kc, wdtype);
    if (!p || !geom_ok(g)) return 0;
    const int64_t k = (int64_t)g->cin * g->kh * g->kw;
    return HEADER_BYTES + (size_t)ceil_div(g->cout, p->nr) * round64(panel_bytes(p, k) + FX_GEMM_PACK_SLACK);
}

/* w [cout, cin, kk] (row stride ld) → dst [cout, kk, cin]; 2- or 4-byte
 * elements, moved bit for bit. */
#define REORDER(T)                                                                                \
    for (int64_t co = 0; co < w->n; co++) {                                                       \
        const T *s = (const T *)w->data + co * w->ld;                                              \
        T *o = (T *)dst + co * w->k;                                                              \
        for (int k = 0; k < kk; k++)                                                              \
            for (int ci = 0; ci < cin; ci++) o[(int64_t)k * cin + ci] = s[(int64_t)ci * kk + k];  \
    }
static void reorder_weight(const fx_weight *w, int cin, int kk, size_t es, void *dst) {
    if (es == 2) REORDER(uint16_t)
    else REORDER(uint32_t)
}
#undef REORDER

int fx_conv2d_pack(const fx_kctx *kc, const fx_conv2d_geom *g, const fx_weight *w, void *packed) {
    const fx_gemm_path *p = conv_path(kc, w->dtype);
    const int64_t k = (int64_t)g->cin * g->kh * g->kw;
    if (!p || !geom_ok(g) || w->n != g->cout || w->k != k || w->ld < k) return -1;
    conv_pack_header *h = packed;
    memset(h, 0, sizeof *h);
    h->path = p, h->dtype = w->dtype;
    h->cout = g->cout, h->cin = g->cin, h->kh = g->kh, h->kw = g->kw;
    h->k = k, h->ksteps = ceil_div(k, p->kpair);
    /* each panel keeps its own packer slack: panels are packed in parallel */
    h->panel_bytes = round64(panel_bytes(p, k) + FX_GEMM_PACK_SLACK);
    h->panels = (int)ceil_div(g->cout, p->nr);

    /* k order (ky, kx, ci): a reordered copy unless the kernel is 1×1; each
     * thread reorders the rows of its own panels, then packs them */
    const size_t es = fx_dtype_size(w->dtype);
    const int kk = g->kh * g->kw;
    void *owned = NULL, *r = NULL;
    if (kk > 1) {
        size_t bytes = (size_t)w->n * (size_t)k * es;
        r = kc && kc->scratch ? fx_scratch_slot_get(kc->scratch, FX_SLOT_CONVW, bytes) : NULL;
        if (!r) r = owned = malloc(bytes);
        if (!r) return -1;
    }
    const void *src = r ? r : w->data;
    const int64_t ld = r ? k : w->ld;
    char *panels = (char *)packed + HEADER_BYTES;
    const int threads = kc && kc->threads > 0 ? kc->threads : 1;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel num_threads(threads) if ((double)g->cout * (double)k > 1e6)
    {
        int tid = fx_thread_id(), nt = fx_thread_count();
        int j0 = (int)((int64_t)h->panels * tid / nt), j1 = (int)((int64_t)h->panels * (tid + 1) / nt);
        for (int j = j0; j < j1; j++) {
            int n = g->cout - j * p->nr < p->nr ? g->cout - j * p->nr : p->nr;
            if (r) {
                fx_weight rows = *w;
                rows.data = (const char *)w->data + (size_t)j * (size_t)p->nr * (size_t)w->ld * es;
                rows.n = n;
                reorder_weight(&rows, g->cin, kk, es, (char *)r + (size_t)j * (size_t)p->nr * (size_t)k * es);
            }
            p->pack_w[w->dtype](p, n, k, (const char *)src + (size_t)j * (size_t)p->nr * (size_t)ld * es, ld,
                                panels + (size_t)j * h->panel_bytes);
        }
    }
    free(owned);
    return 0;
}

/* Everything the threads share for one call. */
typedef struct conv_run {
    const fx_conv2d_geom *g;
    const conv_pack_header *h;
    const char *panels;
    const float *x;
    int x_row0, x_rows;
    int wo;
    float *y;
    int64_t pix0, npix; /* output pixels [pix0, pix0 + npix) (pixel = oy·wo + ox) */
    const fx_epilogue *epi;
    int block_tiles;
    int tapwise;        /* pack_tile_taps (else gather whole im2col rows) */
    size_t gather_bytes, apanel_bytes, thread_bytes;
} conv_run;

/* im2col rows of `m` pixels from pixel pix into g [m][K] (k = ky, kx, ci). */
static void gather_tile(const conv_run *r, int64_t pix, int m, float *gbuf) {
    const fx_conv2d_geom *g = r->g;
    const int up = g->upsample2x ? 1 : 0;
    const int64_t hh = (int64_t)g->h << up, ww = (int64_t)g->w << up;
    const int64_t cin = g->cin, k = r->h->k;
    const size_t row = sizeof(float) * (size_t)cin;
    for (int i = 0; i < m; i++) {
        const int64_t p = pix + i, oy = p / r->wo, ox = p % r->wo;
        float *dst = gbuf + i * k;
        for (int ky = 0; ky < g->kh; ky++) {
            const int64_t iy = oy * g->stride - g->pad_top + ky; /* in the upsampled frame */
            const float *xrow = iy >= 0 && iy < hh ? r->x + ((iy >> up) - r->x_row0) * g->w * cin : NULL;
            for (int kx = 0; kx < g->kw; kx++, dst += cin) {
                const int64_t ix = ox * g->stride - g->pad_left + kx;
                if (!xrow || ix < 0 || ix >= ww) memset(dst, 0, row);
                else memcpy(dst, xrow + (ix >> up) * cin, row);
            }
        }
    }
}

/* The A micro-panel of a tile tap by tap (k = tap·cin + ci; needs cin a
 * multiple of kpair, no upsampling): where the tile's pixels lie in one
 * output row and the tap reads inside the input, its rows are a strided
 * matrix of the input (row stride stride·cin) packed in place; otherwise
 * (padding, a tile wrapping to the next row) they are gathered first. Taps
 * in increasing order: a packer's slack lands in the next tap. */
static void pack_tile_taps(const conv_run *r, int64_t pix, int m, float *gbuf, char *a) {
    const fx_conv2d_geom *g = r->g;
    const fx_gemm_path *p = r->h->path;
    const int64_t cin = g->cin;
    const size_t tap_bytes = (size_t)(cin / p->kpair) * (size_t)p->mr * (size_t)p->kpair * (size_t)p->elem;
    const int64_t oy0 = pix / r->wo, ox0 = pix % r->wo;
    const int one_row = ox0 + m <= r->wo;
    for (int ky = 0; ky < g->kh; ky++)
        for (int kx = 0; kx < g->kw; kx++) {
            char *dst = a + (size_t)(ky * g->kw + kx) * tap_bytes;
            const int64_t iy = oy0 * g->stride - g->pad_top + ky;
            const int64_t ix0 = ox0 * g->stride - g->pad_left + kx, ix1 = ix0 + (int64_t)(m - 1) * g->stride;
            if (one_row && iy >= 0 && iy < g->h && ix0 >= 0 && ix1 < g->w) {
                const float *src = r->x + ((iy - r->x_row0) * g->w + ix0) * cin;
                p->pack_x(p, m, cin, src, g->stride * cin, dst);
                continue;
            }
            for (int i = 0; i < m; i++) {
                const int64_t q = pix + i, oy = q / r->wo, ox = q % r->wo;
                const int64_t y = oy * g->stride - g->pad_top + ky, x = ox * g->stride - g->pad_left + kx;
                float *d = gbuf + i * cin;
                if (y < 0 || y >= g->h || x < 0 || x >= g->w) memset(d, 0, sizeof(float) * (size_t)cin);
                else memcpy(d, r->x + ((y - r->x_row0) * g->w + x) * cin, sizeof(float) * (size_t)cin);
            }
            p->pack_x(p, m, cin, gbuf, cin, dst);
        }
}

/* The hooks on the GEMM nest (simd/gemm/gemm_nest.h): M blocks of
 * block_tiles tiles (MR pixels each, the last may be short) handed out
 * dynamically, one N chunk (every B panel), one K block (the whole K). */

/* A block's tiles gathered and packed into this thread's A buffer. */
static void conv_pass(const void *ctx, fx_gemm_thread *th, const fx_gemm_pass *q) {
    const conv_run *r = ctx;
    const fx_gemm_path *p = r->h->path;
    const int mr = p->mr;
    float *gbuf = (float *)(void *)th->scratch;
    char *ablk = th->scratch + r->gather_bytes;
    const int64_t bp0 = r->pix0 + q->m0, bpix = q->m1 - q->m0; /* first pixel of the block, pixels */
    const int tiles = (int)ceil_div(bpix, mr);
    for (int t = 0; t < tiles; t++) { /* increasing order: pack slack lands in the next tile */
        int m = (int)(bpix - (int64_t)t * mr < mr ? bpix - (int64_t)t * mr : mr);
        char *a = ablk + (size_t)t * r->apanel_bytes;
        if (r->tapwise) {
            pack_tile_taps(r, bp0 + (int64_t)t * mr, m, gbuf, a);
        } else {
            gather_tile(r, bp0 + (int64_t)t * mr, m, gbuf);
            p->pack_x(p, m, r->h->k, gbuf, r->h->k, a);
        }
    }
}

/* The microkernel on the tile of pixels [i, i + MR) × output channels
 * [j, j + NR): the whole K in one call (B panel j / NR, packed per layer). */
static void conv_tile(const void *ctx, fx_gemm_thread *th, const fx_gemm_pass *q, int64_t i, int64_t j) {
    const conv_run *r = ctx;
    const fx_gemm_path *p = r->h->path;
    const int mr = p->mr, nr = p->nr, cout = r->g->cout;
    const fx_epilogue *e = r->epi;
    const char *ablk = th->scratch + r->gather_bytes;
    const char *bpan = r->panels + (size_t)(j / nr) * r->h->panel_bytes;
    fx_gemm_tile tile;
    tile.m = (int)(q->m1 - i < mr ? q->m1 - i : mr);
    tile.n = (int)(cout - j < nr ? cout - j : nr);
    tile.first = tile.last = 1;
    tile.mode = e->mode;
    tile.bias = e->bias ? e->bias + j : NULL;
    tile.gate = e->gate ? e->gate + j : NULL;
    tile.pf = NULL;
    float *c = r->y + i * cout + j;
    tile.c = c, tile.ldc = cout;
    tile.partial = c, tile.ldp = cout;
    p->kernel(r->h->ksteps, ablk + (size_t)((i - q->m0) / mr) * r->apanel_bytes, bpan, &tile);
}

static void conv_begin(const void *ctx, fx_gemm_thread *th) {
    const conv_run *r = ctx;
    (void)th;
    if (r->h->path->thread_begin) r->h->path->thread_begin(); /* the AMX tile configuration */
}

static void conv_end(const void *ctx, fx_gemm_thread *th) {
    const conv_run *r = ctx;
    (void)th;
    if (r->h->path->thread_end) r->h->path->thread_end();
}

static void fill_nan_rows(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
}

int fx_conv2d_packed(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x, int x_row0, int x_rows,
                     const void *packed, const fx_epilogue *epi, float *y, int row0, int row1) {
    static const fx_epilogue store = {FX_EPI_STORE, NULL, NULL};
    if (!epi) epi = &store;
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    const conv_pack_header *h = packed;
    if (ho <= 0 || wo <= 0 || !h || h->cout != g->cout || h->cin != g->cin || h->kh != g->kh || h->kw != g->kw)
        return -1;
    if (row1 <= 0 || row1 > ho) row1 = ho;
    if (row0 < 0) row0 = 0;
    if (row0 >= row1) return 0;
    const int64_t npix = (int64_t)(row1 - row0) * wo;
    int in0, in1;
    fx_conv2d_input_rows(g, row0, row1, &in0, &in1);
    if (in0 < in1 && (in0 < x_row0 || in1 > x_row0 + x_rows)) { /* the window lacks rows */
        fill_nan_rows(y, npix * g->cout);
        return -1;
    }
    const fx_gemm_path *p = h->path;
    conv_run r = {0};
    r.g = g, r.h = h, r.panels = (const char *)packed + HEADER_BYTES;
    r.x = x, r.x_row0 = x_row0, r.x_rows = x_rows;
    r.wo = wo, r.y = y, r.pix0 = (int64_t)row0 * wo, r.npix = npix, r.epi = epi;
    r.apanel_bytes = round64((size_t)h->ksteps * (size_t)p->mr * (size_t)p->kpair * (size_t)p->elem);
    int bt = (int)(L2_BUDGET > h->panel_bytes ? (L2_BUDGET - h->panel_bytes) / r.apanel_bytes : 0);
    r.block_tiles = bt < 1 ? 1 : bt > BLOCK_TILES_MAX ? BLOCK_TILES_MAX : bt;
    r.tapwise = !g->upsample2x && g->cin % p->kpair == 0;
    r.gather_bytes = round64(sizeof(float) * (size_t)p->mr * (size_t)h->k);
    r.thread_bytes = r.gather_bytes + (size_t)r.block_tiles * r.apanel_bytes + round64(FX_GEMM_PACK_SLACK);

    int threads = kc && kc->threads > 0 ? kc->threads : 1;
    const int64_t tiles = ceil_div(npix, p->mr);
    if (threads > tiles) threads = (int)tiles;
    if (2.0 * (double)npix * (double)h->k * (double)g->cout < 2e6) threads = 1;
    /* Blocks are handed out dynamically (a slower or disturbed core takes
     * fewer); every tile is computed the same way wherever it runs. The
     * micro loops: B panels outer, the block's tiles inner. */
    fx_gemm_nest nest = {
        .m = npix, .n = g->cout, .k = h->k,
        .mu = p->mr, .nu = p->nr,
        .mc = (int64_t)r.block_tiles * p->mr, .nc = h->panels, .kc = h->k,
        .dynamic_m = 1,
        .ctx = &r,
        .begin = conv_begin, .end = conv_end, .pass = conv_pass, .tile = conv_tile,
        .thread_bytes = r.thread_bytes,
    };
    if (!kc || fx_gemm_nest_reserve(kc, &nest, threads)) {
        fill_nan_rows(y, npix * g->cout);
        return -1;
    }
    fx_gemm_nest_run(&nest, threads);
    return 0;
}

void fx_conv2d(const fx_kctx *kc, const fx_conv2d_geom *g, const float *x, const fx_weight *w,
               const fx_epilogue *epi, float *y, int row0, int row1) {
    int ho, wo;
    fx_conv2d_out_size(g, &ho, &wo);
    const int64_t kdim = (int64_t)g->cin * g->kh * g->kw;
    if (ho <= 0 || wo <= 0 || w->n != g->cout || w->k != kdim) return; /* out of contract */
    if (row1 <= 0 || row1 > ho) row1 = ho;
    if (row0 < 0) row0 = 0;
    if (row0 >= row1) return;

    if (kdim == g->cin && g->stride == 1 && !g->upsample2x && !g->pad_top && !g->pad_left &&
        !g->pad_bottom && !g->pad_right) { /* 1×1: x already is the matrix */
        fx_linear(kc, (int64_t)(row1 - row0) * wo, x + (int64_t)row0 * g->w * g->cin, g->cin, w,
                  y + (int64_t)row0 * wo * g->cout, g->cout, epi);
        return;
    }
    size_t bytes = fx_conv2d_packed_bytes(kc, g, w->dtype);
    void *owned = NULL;
    void *packed = bytes && kc && kc->scratch ? fx_scratch_slot_get(kc->scratch, FX_SLOT_IM2COL, bytes) : NULL;
    if (!packed && bytes) packed = owned = aligned_alloc(64, round64(bytes));
    if (!packed || fx_conv2d_pack(kc, g, w, packed) ||
        fx_conv2d_packed(kc, g, x, 0, g->h, packed, epi, y + (int64_t)row0 * wo * g->cout, row0, row1))
        fill_nan_rows(y + (int64_t)row0 * wo * g->cout, (int64_t)(row1 - row0) * wo * g->cout);
    free(owned);
}
