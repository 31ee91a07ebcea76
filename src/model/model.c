/*
 * model.c — the official model folder → a struct fx_model (model.h).
 *
 *   <dir>/model_index.json                        variant (is_distilled)
 *   <dir>/transformer/config.json + weights       Flux2Transformer2DModel
 *   <dir>/text_encoder/config.json + weights      Qwen3 (often sharded)
 *   <dir>/vae/config.json + weights               AutoencoderKLFlux2
 *   <dir>/scheduler/scheduler_config.json         FlowMatchEulerDiscrete
 *   <dir>/tokenizer/tokenizer.json                path only (tokenizer.c)
 * or, without a folder, the transformer, text encoder and VAE files of the
 * load options with configs derived from their shapes (config_derive.h),
 * the tokenizer from --tokenizer, the GGUF text encoder or the installed
 * copy, and the variant from the files' hints (variant.h).
 */
#include "model.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/clock.h"

#ifndef FX_SHARE_DIR /* set by the Makefile from PREFIX */
#define FX_SHARE_DIR "/usr/local/share/flux"
#endif

#include "quantize.h"
#include "src/base/json.h"
#include "src/formats/qwen3_file.h"
#include "src/formats/single_file.h"
#include "src/formats/gguf.h"
#include "src/formats/vae_file.h"
#include "config_derive.h"
#include "variant.h"

int fx_load_options_copy(flux_load_options *dst, const flux_load_options *src) {
    *dst = *src;
    dst->transformer_file = src->transformer_file ? strdup(src->transformer_file) : NULL;
    dst->text_encoder_file = src->text_encoder_file ? strdup(src->text_encoder_file) : NULL;
    dst->quant = src->quant ? strdup(src->quant) : NULL;
    dst->vae_file = src->vae_file ? strdup(src->vae_file) : NULL;
    dst->tokenizer_file = src->tokenizer_file ? strdup(src->tokenizer_file) : NULL;
    if ((src->transformer_file && !dst->transformer_file) || (src->text_encoder_file && !dst->text_encoder_file) ||
        (src->quant && !dst->quant) || (src->vae_file && !dst->vae_file) ||
        (src->tokenizer_file && !dst->tokenizer_file)) {
        fx_load_options_free(dst);
        return -1;
    }
    return 0;
}

void fx_load_options_free(flux_load_options *lo) {
    free((char *)lo->transformer_file);
    free((char *)lo->text_encoder_file);
    free((char *)lo->quant);
    free((char *)lo->vae_file);
    free((char *)lo->tokenizer_file);
    lo->transformer_file = lo->text_encoder_file = lo->quant = lo->vae_file = lo->tokenizer_file = NULL;
}

void fx_model_free(struct fx_model *m) {
    if (!m) return;
    fx_wset_close(m->transformer_w);
    fx_wset_close(m->vae_w);
    fx_wset_close(m->text_encoder_w);
    fx_wset_close(m->text_encoder_q);
    free(m->tokenizer_path);
    free(m->tokenizer_gguf);
    fx_load_options_free(&m->lo);
    free(m->dir);
    free(m->name);
    free(m);
}

/* 1 if any tensor of the set is stored in a block type (already quantized). */
static int has_blocks(const fx_wset *w) {
    for (size_t i = 0; i < fx_wset_count(w); i++) {
        fx_dtype dt = fx_wset_tensor_at(w, i)->dtype;
        if (fx_dtype_is_weight(dt) && fx_dtype_is_block(dt)) return 1;
    }
    return 0;
}

/* The component quantized into an in-memory GGUF, opened like a community
 * file of it (the source set keeps its headers; its data is read once). */
static fx_wset *quantize_on_load(struct fx_model *m, fx_wset *src, fx_component c, const fx_logger *log, fx_err *err) {
    const char *what = c == FX_COMPONENT_TRANSFORMER ? "transformer" : "text encoder";
    fx_qplan plan;
    if (fx_qplan_build(m, src, c, (fx_dtype)m->quant, 0, &plan, err)) return NULL;
    void *image = NULL;
    size_t size = 0;
    double t0 = fx_now_s();
    flux_status st = fx_quantize_to_memory(m, src, &plan, &m->kc, &image, &size, err);
    fx_qplan_free(&plan);
    if (st) return NULL;
    fx_log(log, 1, "flux: %s quantized to %s on load: %.2f GB in %.1f s", what, fx_dtype_name((fx_dtype)m->quant),
           (double)size / 1e9, fx_now_s() - t0);
    char display[64];
    snprintf(display, sizeof display, "<%s quantized to %s>", what, fx_dtype_name((fx_dtype)m->quant));
    fx_wset *base = fx_wset_open_memory(image, size, display, 1, err);
    if (!base) return NULL;
    return c == FX_COMPONENT_TRANSFORMER ? fx_single_file_wrap(base, log, NULL, err) : fx_qwen3_file_wrap(base, log, err);
}

fx_wset *fx_model_text_encoder_weights(struct fx_model *m, fx_err *err) {
    if (!m || !m->text_encoder_w) {
        fx_fail(err, FLUX_ERR_STATE, "no model is loaded");
        return NULL;
    }
    if (m->text_encoder_q) return m->text_encoder_q;
    if (fx_wset_load_data(m->text_encoder_w, m->use_mmap, err)) return NULL;
    if (m->quant < 0 || has_blocks(m->text_encoder_w)) return m->text_encoder_w;
    m->text_encoder_q = quantize_on_load(m, m->text_encoder_w, FX_COMPONENT_TEXT_ENCODER, NULL, err);
    fx_wset_drop_data(m->text_encoder_w); /* the quantized copy replaces it */
    if (m->text_encoder_q && fx_check_qwen3_weights(m->text_encoder_q, &m->qwen3, err)) {
        fx_wset_close(m->text_encoder_q);
        m->text_encoder_q = NULL;
    }
    return m->text_encoder_q;
}

void fx_model_release_text_encoder_weights(struct fx_model *m) {
    if (!m) return;
    if (m->text_encoder_w) fx_wset_drop_data(m->text_encoder_w);
    fx_wset_close(m->text_encoder_q);
    m->text_encoder_q = NULL;
}

flux_status fx_model_check_unchanged(const struct fx_model *m, fx_err *err) {
    const fx_wset *sets[3] = {m->transformer_w, m->vae_w, m->text_encoder_w};
    for (int i = 0; i < 3; i++)
        if (sets[i]) TRY(fx_wset_check_unchanged(sets[i], err));
    return FLUX_OK;
}

flux_status fx_model_check_faults(const struct fx_model *m, fx_err *err) {
    const fx_wset *sets[3] = {m->transformer_w, m->vae_w, m->text_encoder_w};
    for (int i = 0; i < 3; i++)
        if (sets[i]) TRY(fx_wset_check_faults(sets[i], err));
    return FLUX_OK;
}

/* "<dir>/<rel>" into a fixed buffer; error if it does not fit. */
static flux_status path_of(const struct fx_model *m, const char *rel, char *out, size_t size, fx_err *err) {
    int n = snprintf(out, size, "%s/%s", m->dir, rel);
    if (n < 0 || (size_t)n >= size) return fx_fail(err, FLUX_ERR_INVALID_ARG, "path too long: %s/%s", m->dir, rel);
    return FLUX_OK;
}

/* Parse the config file <dir>/<rel> with `parse`. */
typedef flux_status (*config_parser)(const fx_json *root, const char *file, void *out, fx_err *err);

static flux_status read_config(const struct fx_model *m, const char *rel, config_parser parse, void *out,
                               fx_err *err) {
    char path[PATH_MAX];
    TRY(path_of(m, rel, path, sizeof path, err));
    fx_json_doc *doc = fx_json_parse_file(path, rel, err);
    if (!doc) return err->code;
    flux_status st = parse(fx_json_root(doc), rel, out, err);
    fx_json_free(doc);
    return st;
}

/* Adapters from the typed parsers to config_parser. */
static flux_status parse_pipeline(const fx_json *r, const char *f, void *o, fx_err *e) {
    return fx_pipeline_config_parse(r, f, o, e);
}
static flux_status parse_dit(const fx_json *r, const char *f, void *o, fx_err *e) {
    return fx_dit_config_parse(r, f, o, e);
}
static flux_status parse_qwen3(const fx_json *r, const char *f, void *o, fx_err *e) {
    return fx_qwen3_config_parse(r, f, o, e);
}
static flux_status parse_vae(const fx_json *r, const char *f, void *o, fx_err *e) {
    return fx_vae_config_parse(r, f, o, e);
}
static flux_status parse_sched(const fx_json *r, const char *f, void *o, fx_err *e) {
    return fx_sched_config_parse(r, f, o, e);
}

/* The folder's display name: last component of its real path. */
static char *folder_name(const char *dir) {
    char real[PATH_MAX];
    const char *p = realpath(dir, real) ? real : dir;
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && p[start - 1] != '/') start--;
    char *name = malloc(len - start + 1);
    if (name) memcpy(name, p + start, len - start), name[len - start] = '\0';
    return name;
}

/* Open one component's weight set and check it against its tensor table. */
static flux_status open_weights(const struct fx_model *m, const char *component, const char *base, int use_mmap,
                                fx_wset **out, fx_err *err) {
    char dir[PATH_MAX];
    TRY(path_of(m, component, dir, sizeof dir, err));
    *out = fx_wset_open_component(dir, component, base, use_mmap, err);
    return *out ? FLUX_OK : err->code;
}

/* The folder's configs (every one but the VAE's when a VAE file is given:
 * its config comes from its shapes). */
static flux_status read_folder_configs(struct fx_model *m, const fx_logger *log, const flux_load_options *lo,
                                       fx_err *err) {
    TRY(read_config(m, "model_index.json", parse_pipeline, &m->pipeline, err));
    if (m->pipeline.class_name[0] && strncmp(m->pipeline.class_name, "Flux2Klein", 10))
        fx_log(log, 1, "flux: model_index.json names pipeline %s; loading it as FLUX.2-klein",
               m->pipeline.class_name);
    TRY(read_config(m, "transformer/config.json", parse_dit, &m->dit, err));
    TRY(read_config(m, "text_encoder/config.json", parse_qwen3, &m->qwen3, err));
    if (!lo->vae_file) TRY(read_config(m, "vae/config.json", parse_vae, &m->vae, err));
    TRY(read_config(m, "scheduler/scheduler_config.json", parse_sched, &m->sched, err));
    if (!lo->vae_file) TRY(fx_configs_check(&m->dit, &m->qwen3, &m->vae, err));
    return FLUX_OK;
}

/* The file exists (what it holds is checked when the tokenizer is read). */
static int readable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The text encoder is a GGUF file on disk that carries its vocabulary. */
static int te_gguf_has_vocab(const struct fx_model *m) {
    const fx_tensor_file *f = fx_wset_file_count(m->text_encoder_w) ? fx_wset_file_at(m->text_encoder_w, 0) : NULL;
    const fx_gguf *g = f ? fx_tensor_file_gguf(f) : NULL;
    const fx_gguf_kv *kv = g ? fx_gguf_find(g, "tokenizer.ggml.tokens") : NULL;
    return kv && kv->type == FX_GGUF_ARRAY && fx_tensor_file_path(f);
}

/* Where the tokenizer comes from: --tokenizer, the folder's, a GGUF text
 * encoder's tokenizer.ggml.* arrays, the installed copy ($FLUX_SHARE_DIR,
 * else make install's $PREFIX/share/flux). */
static flux_status find_tokenizer(struct fx_model *m, const flux_load_options *lo, fx_err *err) {
    char path[PATH_MAX];
    const char *from = NULL;
    if (lo->tokenizer_file) {
        if (!readable(lo->tokenizer_file))
            return fx_fail(err, FLUX_ERR_IO, "cannot open tokenizer %s: %s", lo->tokenizer_file, strerror(errno));
        snprintf(path, sizeof path, "%s", lo->tokenizer_file);
        from = "--tokenizer";
    } else if (m->dir) {
        TRY(path_of(m, "tokenizer/tokenizer.json", path, sizeof path, err));
        if (!readable(path)) return fx_fail(err, FLUX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        from = "the model folder";
    } else if (te_gguf_has_vocab(m)) {
        const fx_tensor_file *f = fx_wset_file_at(m->text_encoder_w, 0);
        const char *te = fx_tensor_file_path(f), *model = "", *pre = "";
        fx_gguf_get_str(fx_tensor_file_gguf(f), "tokenizer.ggml.model", &model);
        fx_gguf_get_str(fx_tensor_file_gguf(f), "tokenizer.ggml.pre", &pre);
        if (strcmp(model, "gpt2") || strcmp(pre, "qwen2")) /* checked now: the arrays are read at the first prompt */
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "%s: its vocabulary is tokenizer.ggml.model '%.40s', pre '%.40s'; flux.c reads the Qwen3 "
                           "one ('gpt2', 'qwen2'): give --tokenizer FILE (tokenizer.json)", te, model, pre);
        if (!(m->tokenizer_gguf = strdup(te))) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
        snprintf(m->tokenizer_source, sizeof m->tokenizer_source, "%.400s (its tokenizer.ggml.* arrays)", te);
        return FLUX_OK;
    } else {
        const char *env = getenv("FLUX_SHARE_DIR");
        snprintf(path, sizeof path, "%s/tokenizer.json", env && *env ? env : FX_SHARE_DIR);
        if (!readable(path))
            return fx_fail(err, FLUX_ERR_IO,
                           "no tokenizer: without a model folder give --tokenizer FILE (tokenizer.json), a GGUF text "
                           "encoder with tokenizer.ggml.* arrays, or install one (make install puts it in %s; "
                           "FLUX_SHARE_DIR overrides); %s was not found", FX_SHARE_DIR, path);
        from = "the installed copy";
    }
    if (!(m->tokenizer_path = strdup(path))) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    snprintf(m->tokenizer_source, sizeof m->tokenizer_source, "%.400s (%s)", path, from);
    return FLUX_OK;
}

static flux_status load_components(struct fx_model *m, const fx_logger *log, const flux_load_options *lo, fx_err *err) {
    if (m->dir) TRY(read_folder_configs(m, log, lo, err));
    else fx_sched_config_klein(&m->sched);

    if (lo->transformer_file) { /* BFL / ComfyUI / diffusers names, mapped (single_file.h) */
        m->transformer_w = fx_single_file_open(lo->transformer_file, m->use_mmap, log, NULL, err);
        if (!m->transformer_w) return err->code;
    } else {
        TRY(open_weights(m, "transformer", "diffusion_pytorch_model.safetensors", m->use_mmap, &m->transformer_w, err));
    }
    if (!m->dir) TRY(fx_dit_config_derive(m->transformer_w, &m->dit, err));
    fx_variant_decide(lo->distilled, m->dir ? m->pipeline.distilled : -1, m->transformer_w, lo->transformer_file,
                      log, &m->distilled, m->variant_why, sizeof m->variant_why);

    if (lo->vae_file) { /* diffusers or BFL names; widths from the shapes (vae_file.h) */
        m->vae_w = fx_vae_file_open(lo->vae_file, m->use_mmap, log, err);
        if (!m->vae_w) return err->code;
        TRY(fx_vae_config_derive(m->vae_w, &m->vae, err));
    } else {
        TRY(open_weights(m, "vae", "diffusion_pytorch_model.safetensors", m->use_mmap, &m->vae_w, err));
    }
    /* text encoder: headers now (validated), data on first use unless eager */
    const int te_mmap = lo->lazy_text_encoder ? -1 : m->use_mmap;
    if (lo->text_encoder_file) { /* llama.cpp or Hugging Face names, one file (qwen3_file.h) */
        m->text_encoder_w = fx_qwen3_file_open(lo->text_encoder_file, te_mmap, log, err);
        if (!m->text_encoder_w) return err->code;
    } else {
        TRY(open_weights(m, "text_encoder", "model.safetensors", te_mmap, &m->text_encoder_w, err));
    }
    if (!m->dir) TRY(fx_qwen3_config_derive(m->text_encoder_w, &m->qwen3, err));
    if (!m->dir || lo->vae_file) TRY(fx_configs_check(&m->dit, &m->qwen3, &m->vae, err));
    TRY(find_tokenizer(m, lo, err));

    TRY(fx_check_dit_weights(m->transformer_w, &m->dit, err));
    fx_wset_quant_note(m->transformer_w, log);
    if (m->quant >= 0 && !has_blocks(m->transformer_w)) {
        fx_wset *q = quantize_on_load(m, m->transformer_w, FX_COMPONENT_TRANSFORMER, log, err);
        if (!q) return err->code;
        fx_wset_close(m->transformer_w);
        m->transformer_w = q;
        TRY(fx_check_dit_weights(m->transformer_w, &m->dit, err));
    }
    TRY(fx_check_vae_weights(m->vae_w, &m->vae, err));
    if (lo->text_encoder_file) TRY(fx_check_qwen3_gguf(m->text_encoder_w, &m->qwen3, err));
    TRY(fx_check_qwen3_weights(m->text_encoder_w, &m->qwen3, err));
    fx_wset_quant_note(m->text_encoder_w, log);
    if (!lo->lazy_text_encoder && m->quant >= 0 && !fx_model_text_encoder_weights(m, err)) return err->code;
    return FLUX_OK;
}

/* The model's name without a folder: the transformer file's, without
 * directory and extension. */
static char *file_model_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    const char *dot = strrchr(b, '.');
    if (dot && dot != b) n = (size_t)(dot - b);
    char *name = malloc(n + 1);
    if (name) memcpy(name, b, n), name[n] = '\0';
    return name;
}

flux_status fx_model_open(const char *model_dir, const flux_load_options *lo, int use_mmap, const fx_logger *log,
                          const fx_kctx *kc, struct fx_model **out, fx_err *err) {
    *out = NULL;
    const int folder = model_dir && *model_dir;
    struct stat st;
    if (!folder && (!lo->transformer_file || !lo->text_encoder_file || !lo->vae_file))
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "no model folder given, and not all three files: without a folder give the transformer, the "
                       "text encoder and the VAE files (--transformer, --text-encoder, --vae)");
    if (folder && stat(model_dir, &st) != 0)
        return fx_fail(err, FLUX_ERR_IO, "model folder %s: %s", model_dir, strerror(errno));
    if (folder && !S_ISDIR(st.st_mode)) return fx_fail(err, FLUX_ERR_IO, "model folder %s is not a folder", model_dir);

    struct fx_model *m = calloc(1, sizeof *m);
    if (!m) return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    m->dir = folder ? strdup(model_dir) : NULL;
    m->name = folder ? folder_name(model_dir) : file_model_name(lo->transformer_file);
    m->use_mmap = use_mmap != 0;
    m->kc = *kc;
    m->quant = -1;
    if (fx_load_options_copy(&m->lo, lo)) {
        fx_model_free(m);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    }
    if (lo->quant) {
        m->quant = fx_dtype_parse(lo->quant);
        if (m->quant < 0 || !fx_dtype_is_block((fx_dtype)m->quant) || !fx_dtype_can_quantize((fx_dtype)m->quant)) {
            fx_model_free(m);
            return fx_fail(err, FLUX_ERR_INVALID_ARG,
                           "unknown quantization type '%s' (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k)",
                           lo->quant);
        }
    }
    if ((folder && !m->dir) || !m->name) {
        fx_model_free(m);
        return fx_fail(err, FLUX_ERR_NOMEM, "out of memory");
    }
    size_t len = folder ? strlen(m->dir) : 0;
    while (len > 1 && m->dir[len - 1] == '/') m->dir[--len] = '\0';

    flux_status status = load_components(m, log, lo, err);
    if (status) {
        fx_model_free(m);
        return status;
    }
    fx_log(log, 1, "flux: loaded %s (%s): transformer %d+%d blocks × %d, text encoder %d/%d layers × %d, %zu+%zu+%zu tensors",
           m->name, m->distilled ? "distilled" : "base", m->dit.double_blocks, m->dit.single_blocks, m->dit.hidden,
           m->qwen3.layers_used, m->qwen3.layers, m->qwen3.hidden, fx_wset_count(m->transformer_w),
           fx_wset_count(m->text_encoder_w), fx_wset_count(m->vae_w));
    fx_log(log, 1, "flux: %s: %s (%s); tokenizer %s", m->name, m->distilled ? "distilled" : "base", m->variant_why,
           m->tokenizer_source);
    if (!m->dir)
        fx_log(log, 1, "flux: no model folder: configs from the shapes: transformer %d heads × %d, MLP %d, text %d; "
               "text encoder %d layers, %d heads (%d kv) × %d, MLP %d, vocab %d; VAE %d latent channels, encoder "
               "widths %d..%d, decoder widths %d..%d", m->dit.heads, m->dit.head_dim, m->dit.mlp_hidden,
               m->dit.text_dim, m->qwen3.layers, m->qwen3.heads, m->qwen3.kv_heads, m->qwen3.head_dim,
               m->qwen3.intermediate, m->qwen3.vocab, m->vae.latent_channels, m->vae.block_out_channels[0],
               m->vae.block_out_channels[m->vae.levels - 1], m->vae.decoder_block_out_channels[0],
               m->vae.decoder_block_out_channels[m->vae.levels - 1]);
    *out = m;
    return FLUX_OK;
}

flux_status fx_model_vecf(fx_ops *ops, const fx_wset *w, int64_t n, fx_buf **out, fx_err *err, const char *fmt, ...) {
    char name[FX_ST_MAX_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    float *host = NULL;
    TRY(fx_wset_vecf(w, &host, n, err, "%s", name));
    flux_status st = fx_ops_vector(ops, host, n, name, out, err);
    free(host);
    return st;
}
