/*
 * fuzz_json.c — libFuzzer target for the JSON parser and the config parsers.
 *
 * Build and run with `make fuzz` (clang -fsanitize=fuzzer,address,undefined).
 * Every parsed document is walked completely (iteratively, like the parser)
 * and handed to each config parser: nothing may crash, read out of bounds
 * or report anything but FLUX_OK / FLUX_ERR_FORMAT / FLUX_ERR_UNSUPPORTED.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/config.h"
#include "src/base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

/* Visit every value once (explicit stack as large as the node count):
 * string invariants, keys, lookups, int/double consistency. */
static void walk(const fx_json_doc *doc) {
    size_t cap = fx_json_node_count(doc), depth = 0, visited = 0;
    const fx_json **stack = malloc(cap * sizeof *stack);
    check(stack != NULL);
    stack[depth++] = fx_json_root(doc);
    while (depth) {
        const fx_json *v = stack[--depth];
        visited++;
        switch (fx_json_typeof(v)) {
        case FX_JSON_STRING:
            check(fx_json_str(v)[fx_json_str_len(v)] == '\0');
            break;
        case FX_JSON_NUMBER:
            if (fx_json_is_int(v)) check((double)fx_json_int(v) == fx_json_num(v));
            break;
        case FX_JSON_OBJECT:
            for (size_t i = 0; i < fx_json_len(v); i++) {
                const char *k = fx_json_key_at(v, i);
                check(k && k[fx_json_key_len_at(v, i)] == '\0');
                if (strlen(k) == fx_json_key_len_at(v, i)) check(fx_json_get(v, k) != NULL);
            }
            /* fallthrough */
        case FX_JSON_ARRAY:
            for (size_t i = 0; i < fx_json_len(v); i++) {
                check(depth < cap);
                stack[depth++] = fx_json_at(v, i);
            }
            check(fx_json_at(v, fx_json_len(v)) == NULL);
            break;
        default:
            break;
        }
    }
    check(visited == cap); /* the node count is exact */
    free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fx_err err;
    fx_err_clear(&err);
    fx_json_doc *doc = fx_json_parse((const char *)data, size, &err);
    if (!doc) {
        check(err.code == FLUX_ERR_FORMAT && err.msg[0]);
        return 0;
    }
    const fx_json *root = fx_json_root(doc);
    walk(doc);

    fx_pipeline_config p;
    fx_dit_config d;
    fx_qwen3_config q;
    fx_vae_config v;
    fx_sched_config s;
    flux_status st[5] = {
        fx_pipeline_config_parse(root, "model_index.json", &p, &err),
        fx_dit_config_parse(root, "transformer/config.json", &d, &err),
        fx_qwen3_config_parse(root, "text_encoder/config.json", &q, &err),
        fx_vae_config_parse(root, "vae/config.json", &v, &err),
        fx_sched_config_parse(root, "scheduler/scheduler_config.json", &s, &err),
    };
    for (int i = 0; i < 5; i++) check(st[i] == FLUX_OK || st[i] == FLUX_ERR_FORMAT || st[i] == FLUX_ERR_UNSUPPORTED);
    if (st[1] == FLUX_OK) {
        check(d.hidden == d.heads * d.head_dim && d.head_dim % 2 == 0 && d.mlp_hidden >= 1);
        check(d.axes_dims[0] + d.axes_dims[1] + d.axes_dims[2] + d.axes_dims[3] == d.head_dim);
    }
    if (st[2] == FLUX_OK) check(q.heads % q.kv_heads == 0 && q.layers >= q.layers_used);
    if (st[3] == FLUX_OK) check(v.levels >= 1 && v.levels <= FX_VAE_MAX_LEVELS);
    if (st[1] == FLUX_OK && st[2] == FLUX_OK && st[3] == FLUX_OK) (void)fx_configs_check(&d, &q, &v, &err);
    fx_json_free(doc);
    return 0;
}
