/*
 * quantize_api.c — flux_quantize (flux.h): a model folder's component
 * written as a peer-readable GGUF file, or an fp8 safetensors file in
 * ComfyUI's convention (src/model/quantize.h).
 */
#include <string.h>
#include <strings.h>

#include "flux.h"
#include "src/model/ctx.h"
#include "src/model/model.h"
#include "src/model/quantize.h"

void flux_quantize_options_init(flux_quantize_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

typedef struct progress_bridge {
    const flux_quantize_options *o;
} progress_bridge;

static int bridge(void *user, size_t done, size_t total, uint64_t bytes_done, uint64_t bytes_total) {
    const flux_quantize_options *o = ((progress_bridge *)user)->o;
    return o->progress(o->progress_user, (int)done, (int)total, bytes_done, bytes_total);
}

flux_status flux_quantize(flux_ctx *ctx, const char *model_dir, const flux_quantize_options *o, const char *out_path) {
    if (!ctx) return FLUX_ERR_INVALID_ARG;
    fx_err *err = &ctx->err;
    fx_err_clear(err);
    if (ctx->options_err.msg[0]) return fx_ctx_fail_from(ctx, &ctx->options_err);
    if (!o || !model_dir || !out_path)
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_quantize: model folder, options and output path are required");
    int type = o->type ? fx_dtype_parse(o->type) : -1;
    if (type >= 0 && (!fx_dtype_is_block((fx_dtype)type) || !fx_dtype_can_quantize((fx_dtype)type))) type = -1;
    if (o->type && (!strcasecmp(o->type, "fp8") || !strcasecmp(o->type, "fp8_e4m3"))) type = FX_DTYPE_F8_E4M3;
    if (o->type && !strcasecmp(o->type, "fp8_e5m2")) type = FX_DTYPE_F8_E5M2;
    if (type < 0)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "flux_quantize: type '%s' is not one of q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
                       "fp8 (= fp8_e4m3), fp8_e5m2",
                       o->type ? o->type : "(none)");
    fx_component c;
    if (o->component && !strcmp(o->component, "transformer")) c = FX_COMPONENT_TRANSFORMER;
    else if (o->component && !strcmp(o->component, "text-encoder")) c = FX_COMPONENT_TEXT_ENCODER;
    else
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "flux_quantize: component '%s' is not transformer or text-encoder",
                       o->component ? o->component : "(none)");
    flux_load_options lo;
    flux_load_options_init(&lo);
    lo.transformer_file = o->transformer_file;
    lo.text_encoder_file = o->text_encoder_file;
    struct fx_model *m = NULL;
    TRY(fx_model_open(model_dir, &lo, ctx->opt.use_mmap, &ctx->log, &ctx->kc, &m, err));
    fx_wset *src = c == FX_COMPONENT_TRANSFORMER ? m->transformer_w : fx_model_text_encoder_weights(m, err);
    fx_qplan plan;
    flux_status st = src ? fx_qplan_build(m, src, c, (fx_dtype)type, 1, &plan, err) : err->code;
    if (!st) {
        progress_bridge pb = {o};
        st = fx_quantize_to_file(m, src, &plan, &ctx->kc, out_path, o->progress ? bridge : NULL, &pb, err);
        fx_qplan_free(&plan);
    }
    fx_model_free(m);
    return st;
}
