/*
 * quantize.c — component → GGUF or fp8 safetensors (quantize.h): the plan
 * (peer names, types, source rows), the file's layout (GGUF key/values, or
 * the safetensors header with the fp8 scales), and the tensor bytes
 * produced in chunks of rows (source → f32 → blocks or fp8 codes), streamed
 * to a file or into memory.
 */
#include "quantize.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/base/atomic_file.h"
#include "src/formats/gguf.h"
#include "src/formats/gguf_write.h"
#include "src/formats/qwen3_file.h"
#include "src/formats/safetensors_write.h"
#include "src/formats/single_file.h"

#define CHUNK_BYTES ((size_t)64 << 20) /* f32 rows viewed (and read ahead) per step */
#define TASK_FLOATS ((int64_t)1 << 16)   /* f32 elements one worker converts and encodes at a time */

/* ------------------------------------------------------------------------ */
/* Plans                                                                    */
/* ------------------------------------------------------------------------ */

static fx_qtensor *plan_add(fx_qplan *p, size_t *cap) {
    if (p->n == *cap) {
        size_t c = *cap ? 2 * *cap : 128;
        fx_qtensor *g = realloc(p->t, c * sizeof *g);
        if (!g) return NULL;
        p->t = g, *cap = c;
    }
    fx_qtensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    return t;
}

/* The output type of a tensor (see quantize.h). */
static fx_dtype type_for(const fx_qplan *p, const fx_qtensor *t) {
    if (t->ndim == 1) return FX_DTYPE_F32;
    if (p->component == FX_COMPONENT_TRANSFORMER) {
        static const char *const keep[] = {"img_in.", "txt_in.", "time_in.", "final_layer."};
        for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
            if (!strncmp(t->name, keep[i], strlen(keep[i]))) return FX_DTYPE_BF16;
    }
    if (fx_dtype_is_fp8(p->type)) { /* the embedding table is looked up by rows, never read as fp8 */
        char llama[FX_ST_MAX_NAME];
        int embedding = p->component == FX_COMPONENT_TEXT_ENCODER &&
                        fx_qwen3_llama_name(t->seg[0].src, llama, sizeof llama) && !strcmp(llama, "token_embd.weight");
        size_t len = strlen(t->name); /* the scale is named after '<layer>.weight' */
        return embedding || len < 7 || strcmp(t->name + len - 7, ".weight") ? FX_DTYPE_BF16 : p->type;
    }
    return t->shape[1] % fx_dtype_block(p->type) ? FX_DTYPE_BF16 : p->type;
}

/* A BFL tensor of `rows` rows: its segments from the diffusers source set,
 * in BFL row order (fx_bfl_map_name read backwards: range r of target i
 * puts target rows [acc, acc + rows) at BFL rows [row0, row0 + rows)). */
static flux_status plan_bfl(fx_qplan *p, size_t *cap, const fx_wset *src, const char *name, int64_t rows,
                            fx_err *err) {
    fx_bfl_target tg[3];
    int k = fx_bfl_map_name(name, name, rows, tg);
    if (k <= 0) return fx_fail(err, FLUX_ERR_INTERNAL, "no diffusers mapping for BFL tensor '%s'", name);
    fx_qtensor *t = plan_add(p, cap);
    if (!t) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    snprintf(t->name, sizeof t->name, "%s", name);
    t->shape[0] = rows;
    int64_t at[3]; /* BFL row of each segment */
    for (int i = 0; i < k; i++) {
        const fx_tensor *st = fx_wset_find(src, tg[i].name);
        if (!st) return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%s' not found", fx_wset_display(src), tg[i].name);
        t->ndim = st->shape.ndim;
        t->shape[1] = st->shape.ndim > 1 ? st->shape.d[1] : 0;
        int64_t acc = 0;
        for (int r = 0; r < tg[i].n_ranges; r++) {
            if (t->n_seg == 3) return fx_fail(err, FLUX_ERR_INTERNAL, "too many row ranges for '%s'", name);
            int j = t->n_seg++;
            snprintf(t->seg[j].src, sizeof t->seg[j].src, "%.200s", tg[i].name);
            t->seg[j].row0 = acc;
            t->seg[j].rows = tg[i].ranges[r].rows;
            at[j] = tg[i].ranges[r].row0;
            acc += tg[i].ranges[r].rows;
        }
    }
    for (int a = 1; a < t->n_seg; a++) /* insertion sort by BFL row */
        for (int b = a; b > 0 && at[b - 1] > at[b]; b--) {
            int64_t r = at[b];
            at[b] = at[b - 1], at[b - 1] = r;
            __typeof__(t->seg[0]) g = t->seg[b];
            t->seg[b] = t->seg[b - 1], t->seg[b - 1] = g;
        }
    return FLUX_OK;
}

static flux_status plan_transformer(fx_qplan *p, const struct fx_model *m, const fx_wset *src, fx_err *err) {
    const fx_dit_config *c = &m->dit;
    const int64_t d = c->hidden, mh = c->mlp_hidden, hd = c->head_dim;
    size_t cap = 0;
    const struct {
        const char *name;
        int64_t rows;
    } globals[] = {
        {"img_in.weight", d},
        {"txt_in.weight", d},
        {"time_in.in_layer.weight", d},
        {"time_in.out_layer.weight", d},
        {"double_stream_modulation_img.lin.weight", 6 * d},
        {"double_stream_modulation_txt.lin.weight", 6 * d},
        {"single_stream_modulation.lin.weight", 3 * d},
    };
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++)
        TRY(plan_bfl(p, &cap, src, globals[i].name, globals[i].rows, err));
    char name[FX_ST_MAX_NAME];
    for (int i = 0; i < c->double_blocks; i++) {
        static const char *const side[2] = {"img", "txt"};
        for (int s = 0; s < 2; s++) {
            const struct {
                const char *fmt;
                int64_t rows;
            } parts[] = {
                {"double_blocks.%d.%s_attn.qkv.weight", 3 * d},     {"double_blocks.%d.%s_attn.norm.query_norm.scale", hd},
                {"double_blocks.%d.%s_attn.norm.key_norm.scale", hd}, {"double_blocks.%d.%s_attn.proj.weight", d},
                {"double_blocks.%d.%s_mlp.0.weight", 2 * mh},        {"double_blocks.%d.%s_mlp.2.weight", d},
            };
            for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
                snprintf(name, sizeof name, parts[k].fmt, i, side[s]);
                TRY(plan_bfl(p, &cap, src, name, parts[k].rows, err));
            }
        }
    }
    for (int j = 0; j < c->single_blocks; j++) {
        const struct {
            const char *fmt;
            int64_t rows;
        } parts[] = {
            {"single_blocks.%d.linear1.weight", 3 * d + 2 * mh},
            {"single_blocks.%d.linear2.weight", d},
            {"single_blocks.%d.norm.query_norm.scale", hd},
            {"single_blocks.%d.norm.key_norm.scale", hd},
        };
        for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
            snprintf(name, sizeof name, parts[k].fmt, j);
            TRY(plan_bfl(p, &cap, src, name, parts[k].rows, err));
        }
    }
    TRY(plan_bfl(p, &cap, src, "final_layer.adaLN_modulation.1.weight", 2 * d, err));
    return plan_bfl(p, &cap, src, "final_layer.linear.weight", c->out_channels, err);
}

/* llama.cpp order: token_embd, blk.0 .. blk.N, output_norm, output. */
static long llama_rank(const char *name) {
    if (!strcmp(name, "token_embd.weight")) return -1;
    if (!strncmp(name, "blk.", 4)) return atol(name + 4);
    return 1L << 30;
}

static int cmp_llama(const void *a, const void *b) {
    const fx_qtensor *x = a, *y = b;
    long rx = llama_rank(x->name), ry = llama_rank(y->name);
    if (rx != ry) return rx < ry ? -1 : 1;
    return strcmp(x->name, y->name);
}

static flux_status plan_text_encoder(fx_qplan *p, const struct fx_model *m, const fx_wset *src, int all_layers,
                                     fx_err *err) {
    size_t cap = 0;
    for (size_t i = 0; i < fx_wset_count(src); i++) {
        const fx_tensor *st = fx_wset_tensor_at(src, i);
        char llama[FX_ST_MAX_NAME];
        if (!fx_qwen3_llama_name(st->name, llama, sizeof llama) || st->shape.ndim < 1 || st->shape.ndim > 2)
            continue; /* not a Qwen3 weight of llama.cpp's table */
        if (!all_layers) { /* only what klein runs */
            long layer = llama_rank(llama);
            if (layer >= m->qwen3.layers_used) continue;
        }
        fx_qtensor *t = plan_add(p, &cap);
        if (!t) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
        snprintf(t->name, sizeof t->name, "%s", fx_dtype_is_fp8(p->type) ? st->name : llama); /* safetensors: HF names */
        t->ndim = st->shape.ndim;
        t->shape[0] = st->shape.d[0];
        t->shape[1] = st->shape.ndim > 1 ? st->shape.d[1] : 0;
        t->n_seg = 1;
        snprintf(t->seg[0].src, sizeof t->seg[0].src, "%s", st->name);
        t->seg[0].rows = st->shape.d[0];
    }
    qsort(p->t, p->n, sizeof *p->t, cmp_llama);
    return FLUX_OK;
}

flux_status fx_qplan_build(const struct fx_model *m, const fx_wset *src, fx_component c, fx_dtype type, int all_layers,
                           fx_qplan *p, fx_err *err) {
    memset(p, 0, sizeof *p);
    if (!fx_dtype_is_fp8(type) && (!fx_dtype_can_quantize(type) || !fx_dtype_is_block(type)))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "cannot quantize to %s", fx_dtype_name(type));
    p->component = c;
    p->type = type;
    flux_status st = c == FX_COMPONENT_TRANSFORMER ? plan_transformer(p, m, src, err)
                                                   : plan_text_encoder(p, m, src, all_layers, err);
    if (!st && !p->n)
        st = fx_fail(err, FLUX_ERR_MODEL, "%s: no tensor to quantize", fx_wset_display(src));
    for (size_t i = 0; !st && i < p->n; i++) {
        p->t[i].dtype = type_for(p, &p->t[i]);
        int64_t numel = p->t[i].ndim == 1 ? p->t[i].shape[0] : p->t[i].shape[0] * p->t[i].shape[1];
        p->bytes += (uint64_t)fx_dtype_row_bytes(p->t[i].dtype, numel) + (fx_dtype_is_fp8(p->t[i].dtype) ? 4 : 0);
    }
    if (st) fx_qplan_free(p);
    return st;
}

void fx_qplan_free(fx_qplan *p) {
    free(p->t);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------ */
/* Key/values and layout                                                    */
/* ------------------------------------------------------------------------ */

/* llama.cpp's general.file_type of an all-one-type file (the _S variants
 * for the K-quants: no tensor gets a larger type). */
static uint32_t file_type(fx_dtype t) {
    switch (t) {
    case FX_DTYPE_Q4_0: return 2;
    case FX_DTYPE_Q4_1: return 3;
    case FX_DTYPE_Q8_0: return 7;
    case FX_DTYPE_Q5_0: return 8;
    case FX_DTYPE_Q5_1: return 9;
    case FX_DTYPE_Q2_K: return 10;
    case FX_DTYPE_Q3_K: return 11;
    case FX_DTYPE_Q4_K: return 14;
    case FX_DTYPE_Q5_K: return 16;
    case FX_DTYPE_Q6_K: return 18;
    default: return 0;
    }
}

static fx_gguf_writer *make_writer(const struct fx_model *m, const fx_qplan *p, fx_err *err) {
    fx_gguf_writer *w = fx_gguf_writer_new();
    int bad = !w;
    if (w && p->component == FX_COMPONENT_TRANSFORMER) {
        bad |= fx_gguf_writer_str(w, "general.architecture", "flux");
    } else if (w) {
        const fx_qwen3_config *q = &m->qwen3;
        bad |= fx_gguf_writer_str(w, "general.architecture", "qwen3");
        bad |= fx_gguf_writer_u32(w, "qwen3.block_count", (uint32_t)q->layers);
        bad |= fx_gguf_writer_u32(w, "qwen3.context_length", (uint32_t)q->max_position_embeddings);
        bad |= fx_gguf_writer_u32(w, "qwen3.embedding_length", (uint32_t)q->hidden);
        bad |= fx_gguf_writer_u32(w, "qwen3.feed_forward_length", (uint32_t)q->intermediate);
        bad |= fx_gguf_writer_u32(w, "qwen3.attention.head_count", (uint32_t)q->heads);
        bad |= fx_gguf_writer_u32(w, "qwen3.attention.head_count_kv", (uint32_t)q->kv_heads);
        bad |= fx_gguf_writer_u32(w, "qwen3.attention.key_length", (uint32_t)q->head_dim);
        bad |= fx_gguf_writer_u32(w, "qwen3.attention.value_length", (uint32_t)q->head_dim);
        bad |= fx_gguf_writer_f32(w, "qwen3.rope.freq_base", (float)q->rope_theta);
        bad |= fx_gguf_writer_f32(w, "qwen3.attention.layer_norm_rms_epsilon", q->rms_eps);
    }
    if (w) {
        bad |= fx_gguf_writer_str(w, "general.name", m->name);
        bad |= fx_gguf_writer_u32(w, "general.quantization_version", 2);
        bad |= fx_gguf_writer_u32(w, "general.file_type", file_type(p->type));
    }
    for (size_t i = 0; w && !bad && i < p->n; i++)
        bad |= fx_gguf_writer_tensor(w, p->t[i].name, p->t[i].ndim, p->t[i].shape, p->t[i].dtype) < 0;
    if (bad) {
        fx_gguf_writer_free(w);
        fx_fail(err, FLUX_ERR_NOMEM, "out of memory laying out the GGUF file");
        return NULL;
    }
    return w;
}

/* Where every byte of the output goes: the header, each tensor's offset,
 * the zero padding after it (GGUF alignment) and, for an fp8 tensor, the
 * offset of its F32 '<layer>.weight_scale'. */
typedef struct qlayout {
    unsigned char *hdr;
    size_t hdr_size;
    uint64_t *off, *pad_end, *scale_off; /* [n] each, absolute */
    uint64_t file_size;
} qlayout;

static void layout_free(qlayout *L) {
    free(L->hdr);
    free(L->off);
    free(L->pad_end);
    free(L->scale_off);
    memset(L, 0, sizeof *L);
}

static int64_t tensor_bytes(const fx_qtensor *t) {
    return fx_dtype_row_bytes(t->dtype, t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]);
}

static flux_status layout_gguf(const struct fx_model *m, const fx_qplan *p, qlayout *L, fx_err *err) {
    fx_gguf_writer *w = make_writer(m, p, err);
    if (!w) return err->code;
    L->hdr_size = fx_gguf_writer_header_size(w);
    L->hdr = malloc(L->hdr_size);
    if (L->hdr) fx_gguf_writer_header(w, L->hdr);
    for (size_t i = 0; L->hdr && i < p->n; i++) {
        L->off[i] = fx_gguf_writer_offset(w, (int)i);
        L->pad_end[i] = i + 1 < p->n ? fx_gguf_writer_offset(w, (int)i + 1) : fx_gguf_writer_file_size(w);
    }
    L->file_size = fx_gguf_writer_file_size(w);
    fx_gguf_writer_free(w);
    return L->hdr ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
}

/* ComfyUI's format name of an fp8 type (comfy/quant_ops.py QUANT_ALGOS). */
static const char *comfy_format(fx_dtype t) { return t == FX_DTYPE_F8_E5M2 ? "float8_e5m2" : "float8_e4m3fn"; }

/* The fp8 safetensors file (quantize.h): the plan's tensors plus one F32
 * '<layer>.weight_scale' (shape []) per fp8 weight; the data ordered by
 * element size (F32, BF16, fp8) so that every tensor is aligned to its
 * element and the data has no holes; "__metadata__" carries ComfyUI's
 * "_quantization_metadata" ({"format_version", "layers": {layer:
 * {"format"}}}, which comfy/utils.py turns into the '.comfy_quant' keys). */
static flux_status layout_safetensors(const fx_qplan *p, qlayout *L, fx_err *err) {
    fx_safetensors_entry *e = calloc(2 * p->n, sizeof *e);
    char(*scale_names)[FX_ST_MAX_NAME] = calloc(p->n, sizeof *scale_names);
    fx_strbuf qm = {0}, h = {0};
    flux_status st = e && scale_names ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    size_t ne = 0, layers = 0;
    int64_t rel = 0;
    fx_sb_printf(&qm, "{\"format_version\":\"1.0\",\"layers\":{");
    for (size_t i = 0; !st && i < p->n; i++) {
        const fx_qtensor *t = &p->t[i];
        e[ne++] = (fx_safetensors_entry){t->name, t->dtype, {.ndim = t->ndim, .d = {t->shape[0], t->shape[1]}}, 0, 0};
        if (!fx_dtype_is_fp8(t->dtype)) continue;
        const int layer_len = (int)strlen(t->name) - 7; /* without ".weight" (type_for) */
        snprintf(scale_names[i], sizeof scale_names[i], "%.*s.weight_scale", layer_len, t->name);
        e[ne++] = (fx_safetensors_entry){scale_names[i], FX_DTYPE_F32, {.ndim = 0}, 0, 0};
        fx_sb_printf(&qm, "%s\"%.*s\":{\"format\":\"%s\"}", layers++ ? "," : "", layer_len, t->name,
                     comfy_format(t->dtype));
    }
    fx_sb_str(&qm, "}}");
    /* offsets: widest elements first */
    for (size_t size = 4; !st && size >= 1; size /= 2)
        for (size_t i = 0, k = 0; i < p->n; i++) { /* e[k]: tensor i, e[k + 1]: its scale (fp8) */
            const fx_qtensor *t = &p->t[i];
            if (fx_dtype_size(t->dtype) == size) {
                L->off[i] = (uint64_t)rel;
                e[k].begin = rel, e[k].end = rel += tensor_bytes(t);
            }
            k++;
            if (!fx_dtype_is_fp8(t->dtype)) continue;
            if (size == 4) {
                L->scale_off[i] = (uint64_t)rel;
                e[k].begin = rel, e[k].end = rel += 4;
            }
            k++;
        }
    if (!st && qm.failed) st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    if (!st) {
        const char *meta[4] = {"format", "pt", "_quantization_metadata", qm.s};
        st = fx_safetensors_header(&h, e, ne, meta, 2, "the fp8 safetensors header", err);
    }
    if (!st) {
        L->hdr_size = 8 + h.len;
        L->hdr = malloc(L->hdr_size);
        if (!L->hdr) st = fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        for (int b = 0; b < 8; b++) L->hdr[b] = (unsigned char)((uint64_t)h.len >> (8 * b));
        memcpy(L->hdr + 8, h.s, h.len);
        for (size_t i = 0; i < p->n; i++) {
            L->off[i] += L->hdr_size;
            L->pad_end[i] = L->off[i] + (uint64_t)tensor_bytes(&p->t[i]); /* no padding */
            if (fx_dtype_is_fp8(p->t[i].dtype)) L->scale_off[i] += L->hdr_size;
        }
        L->file_size = L->hdr_size + (uint64_t)rel;
    }
    free(e);
    free(scale_names);
    free(qm.s);
    free(h.s);
    return st;
}

/* The layout of plan p's file: fp8 types write safetensors, the others GGUF. */
static flux_status layout_build(const struct fx_model *m, const fx_qplan *p, qlayout *L, fx_err *err) {
    memset(L, 0, sizeof *L);
    L->off = calloc(p->n, sizeof *L->off);
    L->pad_end = calloc(p->n, sizeof *L->pad_end);
    L->scale_off = calloc(p->n, sizeof *L->scale_off);
    flux_status st = L->off && L->pad_end && L->scale_off ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    if (!st) st = fx_dtype_is_fp8(p->type) ? layout_safetensors(p, L, err) : layout_gguf(m, p, L, err);
    if (st) layout_free(L);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Tensor bytes                                                             */
/* ------------------------------------------------------------------------ */

/* Where produced bytes go: a file (pwrite at their offset, so the workers
 * write their own rows side by side), or memory at `mem`. */
typedef struct sink {
    int fd;             /* -1: memory */
    unsigned char *mem; /* the image; offsets count from its start */
    const char *path;
} sink;

/* 0, or the errno of a failed write. */
static int put_at(const sink *s, uint64_t off, const void *bytes, size_t n) {
    if (s->fd < 0) {
        memcpy(s->mem + off, bytes, n);
        return 0;
    }
    const unsigned char *p = bytes;
    while (n) {
        ssize_t k = pwrite(s->fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        p += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return 0;
}

static flux_status put_fail(const sink *s, int e, fx_err *err) {
    return fx_fail(err, FLUX_ERR_IO, "cannot write %s: %s", s->path, strerror(e));
}

/* Index of the first non-finite of x[0..n), or -1 (a branch-free pass
 * over the exponent bits, vectorized, then the search). */
static int64_t first_non_finite(const float *x, int64_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)x;
    uint32_t any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t i = 0; i < n; i++) any |= (u[i] & 0x7f800000u) == 0x7f800000u;
    for (int64_t i = 0; any && i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

static flux_status non_finite_fail(const fx_qtensor *t, float v, int64_t row, fx_err *err) {
    return fx_fail(err, FLUX_ERR_MODEL, "tensor '%s' (row %lld) holds %s: cannot quantize it", t->name,
                   (long long)row, isnan(v) ? "NaN" : "an infinity");
}

/* Per-worker room for TASK_FLOATS (or one row, if longer) of f32 and their
 * encoding (every encoding is at most 4 bytes per element). */
typedef struct workspace {
    float *f;
    unsigned char *q;
    int64_t floats; /* capacity of each */
    int threads;
} workspace;

/* What the workers of one chunk found: the first failing row (to report
 * the same error at any thread count) and why. */
typedef struct chunk_result {
    int64_t bad_row; /* INT64_MAX: none */
    float bad_value; /* the non-finite value, when write_errno is 0 */
    int write_errno;
} chunk_result;

/* Rows [0, n) of source view w (cols wide) → blocks of type t written at
 * `off` (+ row · row_bytes), in tasks of whole rows spread over the workers;
 * each task converts, checks and encodes its rows in its worker's buffers,
 * so the bytes do not depend on the thread count. fp8 t: the values are
 * divided by `scale` first; amax non-NULL: nothing is written, *amax grows
 * to the largest |value| (the scale pass; a maximum, so the same at any
 * thread count). */
static void quantize_chunk(const fx_weight *w, int64_t n, int64_t cols, fx_dtype t, float scale, float *amax,
                           const fx_kctx *kc, const workspace *ws, const sink *s, uint64_t off, chunk_result *res) {
    const int64_t row_bytes = fx_dtype_row_bytes(t, cols), src_rb = fx_dtype_row_bytes(w->dtype, cols);
    const int64_t task_rows = ws->floats / cols, tasks = (n + task_rows - 1) / task_rows;
    const fx_kctx one = {.k = kc->k, .threads = 1};
    const int threads = ws->threads < tasks ? ws->threads : (int)tasks;
    res->bad_row = INT64_MAX, res->write_errno = 0;
    (void)threads; /* unused without OpenMP */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
    for (int64_t k = 0; k < tasks; k++) {
        int id = 0;
#ifdef _OPENMP
        id = omp_get_thread_num();
#endif
        const int64_t r0 = k * task_rows, rows = n - r0 < task_rows ? n - r0 : task_rows;
        float *f = ws->f + (size_t)id * (size_t)ws->floats;
        unsigned char *q = ws->q + (size_t)id * (size_t)ws->floats * 4;
        fx_dequantize(&one, w->dtype, rows, cols, (const char *)w->data + r0 * src_rb, src_rb, f);
        for (int64_t r = 0; r < rows; r++) fx_weight_values(w, r0 + r, 0, cols, f + r * cols); /* the weight's values */
        int64_t bad = first_non_finite(f, rows * cols);
        if (bad >= 0) {
#pragma omp critical /* unnamed: a named one is an exported symbol of libflux.so */
            if (r0 + bad / cols < res->bad_row) res->bad_row = r0 + bad / cols, res->bad_value = f[bad], res->write_errno = 0;
            continue;
        }
        if (amax) {
            float m = 0.0f;
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < rows * cols; i++) m = fabsf(f[i]) > m ? fabsf(f[i]) : m;
#pragma omp critical
            if (m > *amax) *amax = m;
            continue;
        }
        int e = 0;
        unsigned char *dst = s->fd < 0 ? s->mem + off + (uint64_t)(r0 * row_bytes) : q;
        if (fx_dtype_is_fp8(t)) fx_fp8_quantize_row(t, f, rows * cols, scale, dst);
        else fx_quantize(&one, t, rows, cols, f, dst);
        if (s->fd >= 0) e = put_at(s, off + (uint64_t)(r0 * row_bytes), q, (size_t)(rows * row_bytes));
        if (e) {
#pragma omp critical
            if (r0 < res->bad_row) res->bad_row = r0, res->write_errno = e;
        }
    }
}

/* One pass over the rows of plan tensor t (cols wide) in chunks of `chunk`
 * rows: quantize_chunk's scale pass (amax) or its encoding at `off`. */
static flux_status produce_pass(fx_wset *src, const fx_qtensor *t, int64_t cols, int64_t chunk, float scale,
                                float *amax, const fx_kctx *kc, const workspace *ws, const sink *s, uint64_t off,
                                fx_err *err) {
    const int64_t row_bytes = fx_dtype_row_bytes(t->dtype, cols);
    int64_t out_row = 0;
    for (int g = 0; g < t->n_seg; g++) {
        const fx_tensor *st = fx_wset_find(src, t->seg[g].src);
        if (!st || st->shape.ndim != 2 || st->shape.d[1] != cols)
            return fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%s' missing or not [*, %lld]", fx_wset_display(src),
                           t->seg[g].src, (long long)cols);
        const int64_t rows = t->seg[g].rows, row0 = t->seg[g].row0, all = st->shape.d[0];
        fx_weight w, next;
        TRY(fx_wset_linear_rows(src, t->seg[g].src, all, cols, row0, rows < chunk ? rows : chunk, &w, err));
        for (int64_t r = 0; r < rows; r += chunk) {
            const int64_t n = rows - r < chunk ? rows - r : chunk;
            if (r + n < rows) { /* read ahead */
                const int64_t nn = rows - r - n < chunk ? rows - r - n : chunk;
                TRY(fx_wset_linear_rows(src, t->seg[g].src, all, cols, row0 + r + n, nn, &next, err));
                fx_wset_weight_willneed(src, &next);
            }
            chunk_result res;
            quantize_chunk(&w, n, cols, t->dtype, scale, amax, kc, ws, s, off + (uint64_t)(out_row * row_bytes), &res);
            fx_wset_weight_dontneed(src, &w); /* keep the process small (the page cache keeps them for an fp8 tensor's second pass) */
            if (res.bad_row != INT64_MAX)
                return res.write_errno ? put_fail(s, res.write_errno, err)
                                       : non_finite_fail(t, res.bad_value, out_row + res.bad_row, err);
            out_row += n;
            if (r + n < rows) w = next;
        }
    }
    return FLUX_OK;
}


/* All bytes of plan tensor t at offset `off` of s, chunk by chunk (each
 * chunk a view of at most CHUNK_BYTES of f32; the next one is read ahead
 * while this one is encoded). An fp8 tensor takes two passes over its
 * source: max|W| first, then the codes of W / scale, scale = max|W| /
 * fp8 max (1 if W is all zeros) written as F32 at scale_off. */
static flux_status produce(fx_wset *src, const fx_qtensor *t, const fx_kctx *kc, const workspace *ws, const sink *s,
                           uint64_t off, uint64_t scale_off, fx_err *err) {
    if (t->ndim == 1) {
        float *v = NULL;
        int64_t n = 0;
        TRY(fx_wset_f32(src, t->seg[0].src, &FX_SHAPE(t->shape[0]), &v, &n, err));
        int64_t bad = first_non_finite(v, n);
        flux_status st = bad >= 0 ? non_finite_fail(t, v[bad], bad, err) : FLUX_OK;
        int e = st ? 0 : put_at(s, off, v, (size_t)n * 4); /* F32, little-endian host */
        if (e) st = put_fail(s, e, err);
        free(v);
        return st;
    }
    const int64_t cols = t->shape[1];
    const int64_t chunk = (int64_t)(CHUNK_BYTES / ((size_t)cols * 4)) > 0 ? (int64_t)(CHUNK_BYTES / ((size_t)cols * 4)) : 1;
    const int fp8 = fx_dtype_is_fp8(t->dtype);
    float amax = 0.0f, scale = 1.0f;
    for (int pass = fp8 ? 0 : 1; pass < 2; pass++) {
        if (pass == 1 && fp8) {
            scale = amax > 0.0f ? amax / fx_fp8_max(t->dtype) : 1.0f;
            int e = put_at(s, scale_off, &scale, 4); /* F32, little-endian host */
            if (e) return put_fail(s, e, err);
        }
        TRY(produce_pass(src, t, cols, chunk, scale, pass ? NULL : &amax, kc, ws, s, off, err));
    }
    return FLUX_OK;
}

static const unsigned char zeros[FX_GGUF_DEFAULT_ALIGNMENT];

/* Every tensor into s at its laid-out offset, the padding zeroed; progress
 * per tensor. */
static flux_status produce_all(fx_wset *src, const fx_qplan *p, const qlayout *L, const fx_kctx *kc, const sink *s,
                               fx_qprogress progress, void *user, fx_err *err) {
    workspace ws = {NULL, NULL, TASK_FLOATS, kc && kc->threads > 1 ? kc->threads : 1};
    for (size_t i = 0; i < p->n; i++)
        if (p->t[i].ndim == 2 && p->t[i].shape[1] > ws.floats) ws.floats = p->t[i].shape[1];
    ws.f = malloc((size_t)ws.threads * (size_t)ws.floats * 4);
    ws.q = s->fd < 0 ? NULL : malloc((size_t)ws.threads * (size_t)ws.floats * 4);
    flux_status st = ws.f && (ws.q || s->fd < 0) ? FLUX_OK : fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    uint64_t done = 0;
    for (size_t i = 0; !st && i < p->n; i++) {
        if (progress && progress(user, i, p->n, done, p->bytes)) {
            st = fx_fail(err, FLUX_ERR_CANCELLED, "quantization cancelled");
            break;
        }
        st = produce(src, &p->t[i], kc, &ws, s, L->off[i], L->scale_off[i], err);
        if (st) break;
        const uint64_t nb = (uint64_t)tensor_bytes(&p->t[i]), end = L->off[i] + nb;
        done += nb + (fx_dtype_is_fp8(p->t[i].dtype) ? 4 : 0);
        int e = put_at(s, end, zeros, (size_t)(L->pad_end[i] - end));
        if (e) st = put_fail(s, e, err);
    }
    if (!st && progress) progress(user, p->n, p->n, done, p->bytes);
    free(ws.f);
    free(ws.q);
    return st;
}

flux_status fx_quantize_to_file(const struct fx_model *m, fx_wset *src, const fx_qplan *p, const fx_kctx *kc,
                                const char *path, fx_qprogress progress, void *user, fx_err *err) {
    qlayout L;
    TRY(layout_build(m, p, &L, err));
    fx_atomic_file af = {0};
    flux_status st = fx_atomic_open(&af, path, err);
    if (!st) {
        /* everything through the descriptor: the FILE stays empty, its
         * flush at commit writes nothing */
        sink s = {fileno(af.f), NULL, path};
        int e = fflush(af.f) ? errno : put_at(&s, 0, L.hdr, L.hdr_size);
        st = e ? put_fail(&s, e, err) : produce_all(src, p, &L, kc, &s, progress, user, err);
        if (!st) st = fx_atomic_commit(&af, err);
        else fx_atomic_abort(&af);
    }
    layout_free(&L);
    return st;
}

flux_status fx_quantize_to_memory(const struct fx_model *m, fx_wset *src, const fx_qplan *p, const fx_kctx *kc,
                                  void **image, size_t *size, fx_err *err) {
    *image = NULL;
    qlayout L;
    TRY(layout_build(m, p, &L, err));
    const uint64_t total = L.file_size;
    void *buf = NULL;
    flux_status st = total <= SIZE_MAX && !posix_memalign(&buf, 64, (size_t)total)
                         ? FLUX_OK
                         : fx_fail(err, FLUX_ERR_NOMEM, "out of memory for the %.2f GB quantized %s", (double)total / 1e9,
                                   p->component == FX_COMPONENT_TRANSFORMER ? "transformer" : "text encoder");
    if (!st) {
        memcpy(buf, L.hdr, L.hdr_size);
        sink s = {-1, buf, "memory"};
        st = produce_all(src, p, &L, kc, &s, NULL, NULL, err);
    }
    layout_free(&L);
    if (st) {
        free(buf);
        return st;
    }
    *image = buf;
    *size = (size_t)total;
    return FLUX_OK;
}
