/*
 * wset_quant.c — the scales beside fp8 weights in a weight set (README
 * "fp8 checkpoints": the layouts, their keys and public sources), read and
 * checked at load, and the quantized formats flux.c does not read named.
 *
 * An fp8 (F8_E4M3 / F8_E5M2) weight '<layer>.weight' [n, k] takes at most
 * one of '<layer>.weight_scale', '<layer>.scale_weight' (older ComfyUI
 * "scaled_fp8" files) or '<layer>.weight_scale_inv' (transformers'
 * fine-grained fp8: Qwen3-*-FP8, DeepSeek-V3), whose shape and dtype say
 * the layout; element (r, c) = f32(code) · its scale:
 *   per tensor      [] or [1]                         F32/BF16/F16, finite, nonzero
 *   per output row  [n] or [n, 1]                     F32/BF16/F16, finite
 *   128×128 blocks  [ceil(n/128), ceil(k/128)]        F32/BF16/F16, finite
 *   B×B blocks      [n/B, k/B] ('.weight_scale': convert_to_quant's
 *                   BlockWiseFP8Layout, B = 64 by default)
 *   MXFP8           [roundup(n, 128), roundup(k/32, 4)] F8_E8M0, cuBLAS-tiled
 *                   (comfy-kitchen to_blocked), one per 32 along k, 2^(e-127)
 * NVFP4 (comfy-kitchen tensor/nvfp4.py TensorCoreNVFP4Layout, ComfyUI's
 * "nvfp4" format): '<layer>.weight' U8 [n, k/2] holds E2M1 pairs (read as
 * F4_E2M1 [n, k], fx_wset_adopt_nvfp4), '.weight_scale' F8_E4M3
 * [roundup(n, 128), roundup(k/16, 4)] one per 16 along k in the same
 * cuBLAS tiles, '.weight_scale_2' F32 [] the per-tensor scale; element =
 * e2m1 · (f32(block scale) · scale_2), the product in parentheses rounded
 * once (comfy-kitchen backends/eager/quantization.py dequantize_nvfp4).
 * An I8 weight (ComfyUI / comfy-kitchen int8_tensorwise: TensorWiseINT8Layout,
 * '.weight_scale' per tensor or per output channel) takes the first two.
 * Side scales (all but the first) become an f32 grid owned by the set
 * (fx_weight_scales); the weight's codes stay mapped as stored.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wset_internal.h"

enum scale_kind { SC_NONE, SC_TENSOR, SC_ROW, SC_BLOCK, SC_MX, SC_NVFP4 };
static const char *const kind_names[] = {"none", "per-tensor", "per-row", "square-block", "MXFP8", "NVFP4"};

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a > b && !strcmp(s + a - b, suffix);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The side of the square blocks a 2-D scale grid g covers over a weight
 * [rows, cols]: 128 for [ceil(rows/128), ceil(cols/128)] (partial blocks
 * at the edges), else B when g is [rows/B, cols/B] exactly; 0: neither. */
static int64_t block_side(int64_t rows, int64_t cols, const fx_shape *g) {
    if (g->ndim != 2 || rows <= 0 || cols <= 0 || g->d[0] <= 0 || g->d[1] <= 0) return 0;
    if (g->d[0] == ceil_div(rows, 128) && g->d[1] == ceil_div(cols, 128)) return 128;
    const int64_t b = rows / g->d[0];
    return rows % g->d[0] == 0 && cols % g->d[1] == 0 && cols / g->d[1] == b && b > 1 ? b : 0;
}

/* The tensor '<stem><suffix>' of s, where name = '<stem>.weight' (NULL: none). */
static const fx_tensor *beside(const fx_wset *s, const char *name, const char *suffix) {
    const size_t len = strlen(name);
    if (len < 7 || strcmp(name + len - 7, ".weight")) return NULL;
    char key[FX_ST_MAX_NAME + 32];
    snprintf(key, sizeof key, "%.*s%s", (int)(len - 7), name, suffix);
    return fx_wset_find(s, key);
}

/* The set and name a tensor of s is stored under (views: their source),
 * and the tensor's first row there. */
static fx_wset *stored_as(fx_wset *s, const fx_tensor *t, const fx_tensor **src, int64_t *row0) {
    const view_tensor *v = as_view_tensor(s, t);
    *src = v ? v->src[0] : t;
    *row0 = v ? v->row0[0] : 0;
    return v ? s->base : s;
}

/* The scale tensor of the fp8 / int8 / NVFP4 weight w of s and its
 * layout; FLUX_ERR_MODEL / FLUX_ERR_UNSUPPORTED naming both for anything
 * else. */
static flux_status scale_layout(const fx_wset *s, const fx_tensor *w, const fx_tensor **out, enum scale_kind *kind,
                                fx_err *err) {
    static const char *const suffix[3] = {".weight_scale", ".scale_weight", ".weight_scale_inv"};
    const fx_tensor *found[3], *st = NULL;
    int n = 0;
    for (int i = 0; i < 3; i++)
        if ((found[i] = beside(s, w->name, suffix[i]))) n++, st = found[i];
    *out = st;
    *kind = SC_NONE;
    if (!st) return FLUX_OK;
    if (n > 1)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: fp8 tensor '%.200s' has %d scales (%s%s%s); one convention expected",
                       fx_wset_display(s), w->name, n, found[0] ? "weight_scale " : "",
                       found[1] ? "scale_weight " : "", found[2] ? "weight_scale_inv" : "");
    char sh[96], want[96], grid[96];
    const int64_t rows = w->shape.ndim == 2 ? w->shape.d[0] : 0, cols = w->shape.ndim == 2 ? w->shape.d[1] : 0;
    const fx_shape *g = &st->shape;
    const int inv = st == found[2];
    if (w->dtype == FX_DTYPE_F4_E2M1) { /* NVFP4 */
        const fx_shape tiled = FX_SHAPE(ceil_div(rows, 128) * 128, ceil_div(cols / 16, 4) * 4);
        const fx_tensor *s2 = beside(s, w->name, ".weight_scale_2");
        if (inv || st->dtype != FX_DTYPE_F8_E4M3 || cols % 16 || !fx_shape_eq(g, &tiled) || !s2 ||
            fx_shape_numel(&s2->shape) != 1 || s2->shape.ndim > 1 || s2->dtype != FX_DTYPE_F32)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: NVFP4 weight '%.200s' (E2M1 pairs, %s elements) with scale '%.200s' %s %s: NVFP4 is "
                           "read with k a multiple of 16, F8_E4M3 block scales [roundup(n, 128), roundup(k/16, 4)] "
                           "and one F32 '.weight_scale_2'",
                           fx_wset_display(s), w->name, fx_shape_str(&w->shape, want, sizeof want), st->name,
                           fx_dtype_name(st->dtype), fx_shape_str(g, sh, sizeof sh));
        *kind = SC_NVFP4;
        return FLUX_OK;
    }
    if (st->dtype == FX_DTYPE_F8_E8M0 && !inv) { /* MXFP8: comfy-kitchen TensorCoreMXFP8Layout */
        const fx_shape tiled = FX_SHAPE(ceil_div(rows, 128) * 128, ceil_div(cols / 32, 4) * 4);
        if (w->dtype != FX_DTYPE_F8_E4M3 || !rows || cols % 32 || !fx_shape_eq(g, &tiled))
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: MXFP8 scale '%.200s' %s beside '%.200s' %s %s: MXFP8 is F8_E4M3 [n, k] with k a "
                           "multiple of 32 and E8M0 scales [roundup(n, 128), roundup(k/32, 4)] (%s here)",
                           fx_wset_display(s), st->name, fx_shape_str(g, sh, sizeof sh), w->name,
                           fx_dtype_name(w->dtype), fx_shape_str(&w->shape, want, sizeof want),
                           rows && cols % 32 == 0 ? fx_shape_str(&tiled, grid, sizeof grid) : "k is not");
        *kind = SC_MX;
        return FLUX_OK;
    }
    if (st->dtype != FX_DTYPE_F32 && st->dtype != FX_DTYPE_BF16 && st->dtype != FX_DTYPE_F16)
        return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' has dtype %s, expected F32 (or BF16, F16; F8_E8M0 for MXFP8)",
                       fx_wset_display(s), st->name, fx_dtype_name(st->dtype));
    /* '.weight_scale_inv' multiplies too, whatever its grid (per-channel
     * [n, 1] writers use the name as well) */
    if (fx_shape_numel(g) == 1 && g->ndim <= 1) *kind = SC_TENSOR;
    else if (rows && ((g->ndim == 1 && g->d[0] == rows) || (g->ndim == 2 && g->d[0] == rows && g->d[1] == 1)))
        *kind = SC_ROW;
    else if (block_side(rows, cols, g) && w->dtype != FX_DTYPE_I8) *kind = SC_BLOCK;
    else if (w->dtype == FX_DTYPE_I8)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: scale '%.200s' has shape %s; int8 weight '%.200s' %s takes one scale ([] or [1]) or one "
                       "per output row ([n] or [n, 1])",
                       fx_wset_display(s), st->name, fx_shape_str(g, sh, sizeof sh), w->name,
                       fx_shape_str(&w->shape, want, sizeof want));
    else
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "%s: scale '%.200s' has shape %s; fp8 weight '%.200s' %s takes one scale ([] or [1]), one per "
                       "output row ([n] or [n, 1]) or square block scales ([ceil(n/128), ceil(k/128)], or [n/B, k/B])",
                       fx_wset_display(s), st->name, fx_shape_str(g, sh, sizeof sh), w->name,
                       fx_shape_str(&w->shape, want, sizeof want));
    return FLUX_OK;
}

/* All of st's values as f32 into dst: from the loaded data, or read from
 * the file when only the header is (a check at load). E8M0 is 2^(e-127),
 * e = 0 read as 0 and e = 255 as NaN (comfy-kitchen float_utils.py
 * e8m0_to_f32; 255 is NaN in OCP MX 1.0). */
static flux_status scale_values(const fx_tensor *st, float *dst, fx_err *err) {
    const int64_t n = fx_shape_numel(&st->shape);
    const void *data = fx_tensor_data(st);
    void *buf = NULL;
    if (!data) {
        const fx_tensor_file *f = st->file;
        FILE *fp = f->path ? fopen(f->path, "rb") : NULL;
        buf = malloc(st->nbytes ? (size_t)st->nbytes : 1);
        int ok = fp && buf && fseeko(fp, (off_t)(f->data_off + (uint64_t)st->offset), SEEK_SET) == 0 &&
                 fread(buf, 1, (size_t)st->nbytes, fp) == (size_t)st->nbytes;
        if (fp) fclose(fp);
        if (!ok) {
            free(buf);
            return fx_fail(err, FLUX_ERR_IO, "%s: cannot read scale '%.200s'", f->display, st->name);
        }
        data = buf;
    }
    if (st->dtype == FX_DTYPE_F8_E8M0) {
        const uint8_t *e = data;
        for (int64_t i = 0; i < n; i++) dst[i] = e[i] == 255 ? NAN : e[i] ? ldexpf(1.0f, e[i] - 127) : 0.0f;
    } else {
        fx_tensor_convert_f32(data, st->dtype, n, dst);
    }
    free(buf);
    return FLUX_OK;
}

/* The f32 grid of a side-scale layout from the stored values v: MXFP8's
 * and NVFP4's cuBLAS tiles undone (comfy-kitchen float_utils.py to_blocked:
 * 128-row × 4-column tiles, row-major over the tile grid; in a tile, row
 * i·32 + j, column c at j·16 + i·4 + c; NVFP4's times its scale2). Returns
 * the grid's floats (malloc'd) or NULL; v is used as is (and NULL
 * returned) for the other layouts. */
static float *grid_of(enum scale_kind kind, int64_t rows, int64_t cols, const fx_shape *gs, float *v, float scale2,
                      fx_weight_scales *g) {
    const int64_t side = kind == SC_BLOCK ? block_side(rows, cols, gs) : 0;
    if (kind == SC_ROW) *g = (fx_weight_scales){v, 1, cols > 0 ? cols : 1, 1};
    if (kind == SC_BLOCK) *g = (fx_weight_scales){v, side, side, gs->d[1]};
    if (kind != SC_MX && kind != SC_NVFP4) return NULL;
    const int64_t per = kind == SC_MX ? 32 : 16, nb = cols / per, tiles_c = ceil_div(nb, 4);
    float *s = malloc((size_t)(rows * nb > 0 ? rows * nb : 1) * sizeof *s);
    if (!s) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < nb; c++) {
            const int64_t tile = r / 128 * tiles_c + c / 4, rr = r % 128;
            const float b = v[tile * 512 + rr % 32 * 16 + rr / 32 * 4 + c % 4];
            s[r * nb + c] = kind == SC_NVFP4 ? b * scale2 : b; /* NVFP4: f32(block) · scale_2, one rounding */
        }
    *g = (fx_weight_scales){s, 1, per, nb};
    return s;
}

/* Every value of a layout's scales must be finite; a per-tensor one also
 * nonzero (it divides nothing, but a zero tensor scale is a broken file). */
static flux_status check_values(const fx_wset *s, const fx_tensor *st, enum scale_kind kind, const float *v,
                                fx_err *err) {
    const int64_t n = fx_shape_numel(&st->shape);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || (kind == SC_TENSOR && v[i] == 0.0f))
            return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' is %g%s; %s scales must be finite%s",
                           fx_wset_display(s), st->name, (double)v[i], n > 1 ? " at one element" : "",
                           kind_names[kind], kind == SC_TENSOR ? " and nonzero" : "");
    return FLUX_OK;
}

/* st's values read and checked into a new array (*out; free() it);
 * NVFP4: its '.weight_scale_2' into *scale2 (checked as a per-tensor one). */
static flux_status checked_values(const fx_wset *s, const fx_tensor *w, const fx_tensor *st, enum scale_kind kind,
                                  float **out, float *scale2, fx_err *err) {
    const int64_t n = fx_shape_numel(&st->shape);
    float *v = *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading scale '%.200s'", st->name);
    flux_status rc = scale_values(st, v, err);
    if (!rc) rc = check_values(s, st, kind, v, err);
    const fx_tensor *s2 = kind == SC_NVFP4 ? beside(s, w->name, ".weight_scale_2") : NULL;
    *scale2 = 1.0f;
    if (!rc && s2 && !(rc = scale_values(s2, scale2, err))) rc = check_values(s, s2, SC_TENSOR, scale2, err);
    if (rc) free(v), *out = NULL;
    return rc;
}

/* The grids a set owns: one per fp8 weight with side scales, made on
 * first use. */
struct wset_grid {
    const fx_tensor *w;
    fx_weight_scales g;
    float *own[2];
};

void fx_wset_free_grids(fx_wset *s) {
    for (size_t i = 0; i < s->n_grids; i++) free(s->grids[i]->own[0]), free(s->grids[i]->own[1]), free(s->grids[i]);
    free(s->grids);
    s->grids = NULL;
    s->n_grids = 0;
}

flux_status fx_wset_weight_scales(fx_wset *s, const fx_tensor *t, fx_weight *out, fx_err *err) {
    const fx_tensor *w;
    fx_wset *base = stored_as(s, t, &w, &out->row0);
    const fx_tensor *st;
    enum scale_kind kind;
    out->scale = 1.0f, out->scales = NULL;
    TRY(scale_layout(base, w, &st, &kind, err));
    if (kind == SC_NONE) return FLUX_OK;
    for (size_t i = 0; i < base->n_grids; i++)
        if (base->grids[i]->w == w) {
            out->scales = &base->grids[i]->g;
            return FLUX_OK;
        }
    float *v, scale2;
    TRY(checked_values(base, w, st, kind, &v, &scale2, err));
    if (kind == SC_TENSOR) {
        out->scale = v[0];
        free(v);
        return FLUX_OK;
    }
    /* each grid its own allocation: weights keep pointers to it */
    struct wset_grid **grown = realloc(base->grids, (base->n_grids + 1) * sizeof *grown);
    if (grown) base->grids = grown;
    struct wset_grid *e = grown ? calloc(1, sizeof *e) : NULL;
    float *tiled = e ? grid_of(kind, w->shape.d[0], w->shape.d[1], &st->shape, v, scale2, &e->g) : NULL;
    if (!e || ((kind == SC_MX || kind == SC_NVFP4) && !tiled)) {
        free(v), free(e);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading scale '%.200s'", st->name);
    }
    if (tiled) free(v), v = NULL; /* MXFP8, NVFP4: the grid replaces the tiles */
    base->grids[base->n_grids] = e;
    e->w = w;
    e->own[0] = v, e->own[1] = tiled;
    base->n_grids++;
    out->scales = &e->g;
    return FLUX_OK;
}

flux_status fx_wset_scaled_rows(const fx_wset *s, const fx_tensor *t, int64_t row0, int64_t n, float *x,
                                fx_err *err) {
    if (!fx_dtype_is_scaled(t->dtype)) return FLUX_OK;
    const view_tensor *view = as_view_tensor(s, t);
    if (view) s = s->base, t = view->src[0], row0 += view->row0[0]; /* the stored tensor and its scales */
    const fx_tensor *st;
    enum scale_kind kind;
    TRY(scale_layout(s, t, &st, &kind, err));
    if (kind == SC_NONE) return FLUX_OK;
    const int64_t cols = t->shape.ndim == 2 ? t->shape.d[1] : fx_shape_numel(&t->shape);
    float *v, scale2;
    TRY(checked_values(s, t, st, kind, &v, &scale2, err));
    flux_status rc = FLUX_OK;
    if (kind == SC_TENSOR) fx_weight_scale_row(v[0], n * cols, x);
    else {
        fx_weight w = {.dtype = t->dtype, .n = t->shape.d[0], .k = cols, .ld = cols};
        fx_weight_scales g;
        float *tiled = grid_of(kind, t->shape.d[0], cols, &st->shape, v, scale2, &g);
        if ((kind == SC_MX || kind == SC_NVFP4) && !tiled) rc = fx_fail(err, FLUX_ERR_NOMEM, "out of memory reading scale '%.200s'", st->name);
        w.scales = &g;
        for (int64_t r = 0; !rc && r < n; r++) fx_weight_values(&w, row0 + r, 0, cols, x + r * cols);
        free(tiled);
    }
    free(v);
    return rc;
}

/* ---- quantized formats flux.c does not read, told by their tensor names ---- */

static const struct {
    const char *suffix, *format;
} foreign[] = {
    /* NVFP4 with an activation smoothing vector (ComfyUI QUANT_ALGOS["nvfp4"]
     * parameter 'pre_quant_scale'): not read */
    {".pre_quant_scale", "NVFP4 / AWQ with a pre-quantization scale ('pre_quant_scale')"},
    /* SVDQuant, nunchaku models/linear.py SVDQW4A4Linear */
    {".smooth_factor", "SVDQuant / Nunchaku (4-bit 'qweight' with 'wscales', 'smooth_factor', 'proj_down', 'proj_up')"},
    {".proj_down", "SVDQuant / Nunchaku (4-bit 'qweight' with 'wscales', 'smooth_factor', 'proj_down', 'proj_up')"},
    {".wscales", "SVDQuant / Nunchaku or AWQ (4-bit 'qweight' with 'wscales')"},
    /* AutoGPTQ qlinear QuantLinear, AutoAWQ WQLinear buffers */
    {".qzeros", "GPTQ / AWQ (packed int4 'qweight' with 'qzeros', 'scales', 'g_idx')"},
    {".g_idx", "GPTQ / AWQ (packed int4 'qweight' with 'qzeros', 'scales', 'g_idx')"},
    {".qweight", "GPTQ / AWQ or SVDQuant (packed int4 'qweight')"},
    /* bitsandbytes Linear4bit / Params4bit state dicts (QuantState.as_dict) */
    {".weight.absmax", "bitsandbytes NF4/FP4 ('weight.absmax', 'weight.quant_map', 'weight.quant_state.*')"},
    {".weight.quant_map", "bitsandbytes NF4/FP4 ('weight.absmax', 'weight.quant_map', 'weight.quant_state.*')"},
    {".weight.quant_state.bitsandbytes__nf4", "bitsandbytes NF4 ('weight.absmax', 'weight.quant_map', "
                                              "'weight.quant_state.bitsandbytes__nf4')"},
    {".weight.quant_state.bitsandbytes__fp4", "bitsandbytes FP4 ('weight.absmax', 'weight.quant_map', "
                                              "'weight.quant_state.bitsandbytes__fp4')"},
    /* bitsandbytes Linear8bitLt (LLM.int8) */
    {".SCB", "bitsandbytes LLM.int8 (I8 weights with 'SCB' row scales)"},
};

flux_status fx_wset_refuse_foreign(const fx_wset *s, fx_err *err) {
    if (s->base) s = s->base;
    /* the table's order first: a specific name ('.qzeros') names the format
     * better than a shared one ('.qweight') */
    for (size_t k = 0; k < sizeof foreign / sizeof *foreign; k++)
        for (size_t i = 0; i < s->n; i++)
            if (ends_with(s->tensors[i]->name, foreign[k].suffix))
                return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                               "%s: tensor '%.200s' belongs to the %s format, which flux.c does not read; use the "
                               "BF16, fp8 or GGUF file of this model",
                               fx_wset_display(s), s->tensors[i]->name, foreign[k].format);
    return FLUX_OK;
}

static int is_scale_name(const char *name) {
    return ends_with(name, ".weight_scale") || ends_with(name, ".scale_weight") || ends_with(name, ".weight_scale_inv") ||
           ends_with(name, ".weight_scale_2");
}

void fx_wset_adopt_nvfp4(fx_wset *s) {
    for (size_t i = 0; i < s->n; i++) {
        fx_tensor *t = (fx_tensor *)(void *)s->tensors[i]; /* the set's own files' tensors */
        const fx_tensor *bs = beside(s, t->name, ".weight_scale");
        if (t->dtype == FX_DTYPE_U8 && t->shape.ndim == 2 && t->shape.d[1] <= INT64_MAX / 2 && bs &&
            bs->dtype == FX_DTYPE_F8_E4M3 && beside(s, t->name, ".weight_scale_2"))
            t->dtype = FX_DTYPE_F4_E2M1, t->shape.d[1] *= 2;
    }
}

/* The weight a scale belongs to ('<stem>.weight'), NULL when absent. */
static const fx_tensor *weight_of(const fx_wset *s, const char *scale, char *wname, size_t size) {
    const char *dot = strrchr(scale, '.');
    snprintf(wname, size, "%.*s.weight", (int)(dot - scale), scale);
    return fx_wset_find(s, wname);
}

flux_status fx_wset_check_quant(const fx_wset *s, fx_err *err) {
    if (s->base) s = s->base; /* views: the stored names */
    TRY(fx_wset_refuse_foreign(s, err));
    for (size_t i = 0; i < s->n; i++) {
        const fx_tensor *t = s->tensors[i];
        char wname[FX_ST_MAX_NAME + 16];
        if (is_scale_name(t->name)) {
            const fx_tensor *w = weight_of(s, t->name, wname, sizeof wname);
            if (!w)
                return fx_fail(err, FLUX_ERR_MODEL, "%s: scale '%.200s' has no weight '%.200s'", fx_wset_display(s),
                               t->name, wname);
            if (w->dtype == FX_DTYPE_F32 || w->dtype == FX_DTYPE_BF16 || w->dtype == FX_DTYPE_F16) continue; /* stray */
            if (!fx_dtype_is_scaled(w->dtype))
                return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                               "%s: scale '%.200s' belongs to '%.200s' of dtype %s; flux.c reads scales of fp8 "
                               "(F8_E4M3, F8_E5M2), int8 (I8) and NVFP4 (U8 with F8_E4M3 '.weight_scale' and F32 "
                               "'.weight_scale_2') weights only",
                               fx_wset_display(s), t->name, wname, fx_dtype_name(w->dtype));
        } else if (t->dtype == FX_DTYPE_F8_E8M0) {
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: tensor '%.200s' is F8_E8M0 (MX block scales) but not the '.weight_scale' of an "
                           "F8_E4M3 weight (MXFP8); flux.c reads no other MX format",
                           fx_wset_display(s), t->name);
        } else if (fx_dtype_is_scaled(t->dtype) && t->shape.ndim == 2) {
            /* every fp8 / int8 weight's scales: layout, dtype, values */
            const fx_tensor *st;
            enum scale_kind kind;
            TRY(scale_layout(s, t, &st, &kind, err));
            if (kind == SC_NONE && !fx_dtype_is_fp8(t->dtype))
                return fx_fail(err, FLUX_ERR_MODEL, "%s: %s weight '%.200s' has no '.weight_scale' (its codes need it)",
                               fx_wset_display(s), t->dtype == FX_DTYPE_I8 ? "int8" : "NVFP4", t->name);
            float *v = NULL, scale2;
            if (kind != SC_NONE) TRY(checked_values(s, t, st, kind, &v, &scale2, err));
            free(v);
        }
    }
    return FLUX_OK;
}

flux_status fx_wset_check_device(const fx_wset *s, fx_err *err) {
    if (s->base) s = s->base;
    for (size_t i = 0; i < s->n; i++) {
        const fx_tensor *t = s->tensors[i], *st;
        enum scale_kind kind = SC_NONE;
        if (!fx_dtype_is_scaled(t->dtype) || t->shape.ndim != 2) continue;
        if (fx_dtype_is_fp8(t->dtype) && (scale_layout(s, t, &st, &kind, NULL) || kind <= SC_TENSOR)) continue;
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: %s: weight '%.200s' is %s%s%s; the device reads fp8 with one per-tensor scale and the "
                       "GGUF block types, not this layout (run with --backend cpu)",
                       fx_wset_display(s), t->name,
                       t->dtype == FX_DTYPE_I8 ? "int8" : t->dtype == FX_DTYPE_F4_E2M1 ? "NVFP4" : fx_dtype_name(t->dtype),
                       kind > SC_TENSOR ? " with " : "", kind > SC_TENSOR ? kind_names[kind] : "");
    }
    return FLUX_OK;
}

void fx_wset_quant_note(const fx_wset *s, const fx_logger *log) {
    if (s->base) s = s->base;
    size_t count[6] = {0}, stray = 0, int8 = 0;
    const char *first_stray = NULL;
    for (size_t i = 0; i < s->n; i++) {
        const fx_tensor *t = s->tensors[i];
        char wname[FX_ST_MAX_NAME + 16];
        const fx_tensor *w = is_scale_name(t->name) ? weight_of(s, t->name, wname, sizeof wname) : NULL;
        if (w && !fx_dtype_is_scaled(w->dtype) && !stray++) first_stray = t->name;
        const fx_tensor *st;
        enum scale_kind kind;
        if (fx_dtype_is_scaled(t->dtype) && t->shape.ndim == 2 && !scale_layout(s, t, &st, &kind, NULL)) count[kind]++;
        int8 += t->dtype == FX_DTYPE_I8;
    }
    if (stray)
        fx_log(log, 0,
               "flux: warning: %s: %zu scale tensor%s beside weights that are not fp8 or int8 (first '%s'): ignored, the "
               "weights are read as stored",
               fx_wset_display(s), stray, stray == 1 ? "" : "s", first_stray);
    if (count[SC_ROW] + count[SC_BLOCK] + count[SC_MX] + count[SC_NVFP4] + int8)
        fx_log(log, 1,
               "flux: %s: scaled weights, expanded in place by the GEMM: %zu per-row, %zu 128x128-block, %zu MXFP8, "
               "%zu NVFP4, %zu per-tensor, %zu unscaled (%zu of them int8: W8A8 as stored in the transformer with "
               "--precision int8, else weight-only)",
               fx_wset_display(s), count[SC_ROW], count[SC_BLOCK], count[SC_MX], count[SC_NVFP4], count[SC_TENSOR],
               count[SC_NONE], int8);
}
